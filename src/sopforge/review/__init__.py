"""sopforge.review."""
