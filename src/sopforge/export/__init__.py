"""sopforge.export."""
