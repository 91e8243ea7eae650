"""Fixtures for the maze family: the frozen scenario trees, a business context, the plan-driven fake model."""

from __future__ import annotations

import pytest

from maze_support import RECORDINGS, THEME, load_hrs, load_lrs, scenario_answer
from sopforge.context.model import BusinessContext
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario
from sopforge.llm.providers._files import read_response


@pytest.fixture
def lrs() -> LRSScenario:
    return load_lrs()


@pytest.fixture
def hrs() -> HRSScenario:
    return load_hrs()


@pytest.fixture
def lrs_answer(lrs: LRSScenario) -> str:
    return scenario_answer(lrs)


@pytest.fixture
def hrs_answer(hrs: HRSScenario) -> str:
    return scenario_answer(hrs)


@pytest.fixture
def pharmacy_context() -> BusinessContext:
    text = read_response(RECORDINGS / "pharmacy_refills__context__main__a1.response.md")[1]
    return BusinessContext.parse(text, theme=THEME)
