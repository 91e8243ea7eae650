"""Importing Great Expectations without what sopforge's suites never use, a third cheaper.

GX imports scipy.stats, altair and sqlalchemy at import time for expectations and data sources the
generated suites never contain (the KL-divergence and KS-test expectations, SQL databases). Here
scipy.stats and altair are loaded on first use instead, and sqlalchemy is refused to GX's own imports
as GX supports when installed without its SQL extras. ``benchmarks/gx_import.py`` measures the
difference; ``gx_suite`` is the one user.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["import_gx"]

_IMPORTING = threading.Lock()


def import_gx() -> Any:
    """The ``great_expectations`` module, imported on the first call without what the suites never use."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    # One thread imports at a time: the flow warms GX up in the background (StageSpec.warm_up), and a
    # second thread importing the same package meanwhile could see it half initialised.
    with _IMPORTING:
        if "great_expectations" not in sys.modules:
            _defer_scipy_stats()
            _defer_altair()
            with _without_sqlalchemy():
                import great_expectations  # the first import, with the above in place
        import great_expectations

    return great_expectations


class _DeferredModule(types.ModuleType):
    """Stands in ``sys.modules`` for a package until an attribute is read, which imports the real one.

    Unlike importlib's ``LazyLoader``, it survives ``import name``: the import system reads the module's
    ``__spec__``, which a lazy module answers by loading itself; this stub's ``__spec__`` is None.
    """

    def __getattr__(self, attribute: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def _defer_altair() -> None:
    """Load altair on first use instead of when GX imports it.

    GX's KL-divergence expectation imports it to draw charts, and the generated suites never hold that
    expectation. Measured here (2026-11-27, medians of 8 fresh imports): GX took 3.89 CPU-s, 3.59 without
    altair, 2.89 without sqlalchemy as well."""
    if "altair" not in sys.modules:
        sys.modules["altair"] = _DeferredModule("altair")


@contextmanager
def _without_sqlalchemy() -> Iterator[None]:
    """Import GX as installed without its SQL extras (sqlalchemy is one: ``great_expectations[postgresql]``
    and the like), which it supports: its sqlalchemy names become "not imported" markers. The suites run
    on pandas DataFrames only (for the import's cost, see ``_defer_altair``). Only GX's own imports are
    refused, and only while it is imported: another thread, or anything later, imports sqlalchemy as usual.
    """
    finder = _RefuseToGX("sqlalchemy")
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _RefuseToGX(importlib.abc.MetaPathFinder):
    """An import finder that answers "not installed" when a GX module imports the package."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] == self.package and _imported_by_gx(sys._getframe(1)):
            raise ModuleNotFoundError(f"No module named {name!r} (not needed by sopforge's GX suites)", name=name)
        return None  # the next finder looks for it as usual


def _imported_by_gx(frame: types.FrameType | None) -> bool:
    """Whether the import being resolved was asked for by a GX module (the first frame outside importlib)."""
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__", "").startswith("great_expectations")


def _defer_scipy_stats() -> None:
    """Load ``scipy.stats`` on first use instead of when GX imports it.

    Three GX modules (the KL-divergence expectation and two KS-test metrics) run ``from scipy import
    stats`` at import and use it only when such an expectation is validated, which the generated suites
    never contain; loading it is a third of GX's import (2.05 -> 1.37 CPU-s measured here). The lazy
    module is importlib's own (``LazyLoader``): the first attribute read loads the real one. It is set
    on the ``scipy`` package too, because ``from scipy import stats`` would otherwise go through
    scipy's ``__getattr__`` and the import system, whose look at ``__spec__`` loads it at once.
    """
    if "scipy.stats" in sys.modules:
        return
    try:
        import scipy
        spec = importlib.util.find_spec("scipy.stats")
    except ImportError:
        return  # GX will say so itself
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scipy.stats"] = module
    spec.loader.exec_module(module)
    scipy.stats = module
