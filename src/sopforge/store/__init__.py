"""sopforge.store."""
