"""sopforge.validation."""
