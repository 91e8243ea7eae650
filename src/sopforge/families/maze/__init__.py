"""SOP-Maze: wide (LRS) and deep (HRS) SOP trees, noisy user inputs, computed and verified answers."""
