"""Fewer cyclic garbage collections in sopforge's own processes.

CPython's default thresholds (700, 10, 10) start a young collection after every 700 new container
objects. Importing Prefect, pydantic and Great Expectations creates millions of long-lived ones, so
the collector walks the same young objects over and over. ``benchmarks/gc_thresholds.py`` measures
it: importing Great Expectations and Prefect takes 0.86 of the CPU time with these thresholds, one
offline sop_tools ``generate`` 0.88 (14.4 instead of 16.4 CPU-s), at 4 MB more peak memory.

Called by the entry points only (the ``sopforge`` command, the Prefect processes sopforge starts, a
deployment's flow module, the test workers): importing sopforge as a library leaves the caller's
collector alone.
"""

from __future__ import annotations

import gc
import os

__all__ = ["THRESHOLDS", "collect_less_often"]

# A young collection every 50,000 allocations instead of 700; full collections stay rare while a
# command imports (CPython also skips one until a quarter of the old objects are new).
THRESHOLDS = (50_000, 20, 100)


def collect_less_often() -> None:
    if os.environ.get("SOPFORGE_GC_DEFAULTS") != "1":  # the benchmark's baseline
        gc.set_threshold(*THRESHOLDS)
