"""Artifact models of the sop_tools family: data and parsing only; checks live in ``verify``."""
