"""Artifact models of the PROBE family: data and parsing only; checks live in ``verify``."""
