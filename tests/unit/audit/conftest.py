"""Fixtures for the audit tests; the defect catalogue lives in ``sopbench_defects``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sopbench_defects import DEFECTS, copy_good


@pytest.fixture
def good_folder(tmp_path: Path) -> Path:
    return copy_good(tmp_path)


@pytest.fixture
def make_defect(tmp_path: Path) -> Callable[[str], Path]:
    def make(name: str) -> Path:
        folder = copy_good(tmp_path)
        DEFECTS[name][0](folder)
        return folder
    return make
