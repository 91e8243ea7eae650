"""SOP-Maze family: stages."""
