"""SOP-Maze family: export."""
