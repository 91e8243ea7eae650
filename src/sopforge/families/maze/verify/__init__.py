"""SOP-Maze family: verify."""
