"""Fixtures for the maze family: the recorded example scenarios and business context."""

from __future__ import annotations

import pytest

from maze_support import THEME, recorded
from sopforge.context.model import BusinessContext
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, parse_scenario


@pytest.fixture
def lrs_answer() -> str:
    return recorded("maze_lrs")


@pytest.fixture
def hrs_answer() -> str:
    return recorded("maze_hrs")


@pytest.fixture
def lrs(lrs_answer: str) -> LRSScenario:
    return parse_scenario(lrs_answer, "LRS")  # type: ignore[return-value]


@pytest.fixture
def hrs(hrs_answer: str) -> HRSScenario:
    return parse_scenario(hrs_answer, "HRS")  # type: ignore[return-value]


@pytest.fixture
def pharmacy_context() -> BusinessContext:
    return BusinessContext.parse(recorded("context"), theme=THEME)
