"""SOP-Maze family: models."""
