"""sopforge.stages."""
