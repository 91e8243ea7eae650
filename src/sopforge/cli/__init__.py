"""sopforge.cli."""
