"""Shortcut baselines per scenario: the artifact of maze_baselines (issue 14 item 5).

A benchmark item is only informative when reading it is necessary. Three shortcuts that skip the
reading, scored like a model with the family's scorer; each should stay near the format-only
credit of 0.2 (on wide LRS tasks the paper's models sit there, L165, Table 5):

* ``majority_leaf``: always the reference answer most frequent in this scenario's set (computed
  on the set itself, so it is an upper bound for a prior-only guess);
* ``first_turn``: an LLM reads only the user input up to the first user turn and the tree is
  executed on what it found (a reader that stops early); where that leaves the answer open, an
  LRS reader takes the first option in SOP order still possible and an HRS reader the constant
  answer, so the guess uses no answer of the set;
* ``constant``: one schema-valid answer for everything (the first value of every enum).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sopforge.families.maze.models.instances import Extraction

__all__ = ["BASELINES", "BaselineReport", "BaselineResult", "FirstTurnReading", "ScenarioBaselines"]

BASELINES: tuple[str, ...] = ("majority_leaf", "first_turn", "constant")


class BaselineResult(BaseModel):
    """One shortcut on one scenario."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["majority_leaf", "first_turn", "constant"] = Field(description="Which shortcut.")
    answers: dict[str, dict[str, Any]] = Field(description="Instance id -> the shortcut's answer.")
    scores: dict[str, float] = Field(description="Instance id -> score (1.0 / 0.2 / 0).")
    mean: float = Field(description="Mean score (0 to 1); the format-only credit is 0.2.")
    correct: int = Field(description="Instances the shortcut answers exactly.")


class ScenarioBaselines(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(description="Scenario name.")
    kind: Literal["LRS", "HRS"] = Field(description="Scenario kind.")
    instances: int = Field(description="Instances scored.")
    results: list[BaselineResult] = Field(description="One result per shortcut, in BASELINES order.")

    def result(self, name: str) -> BaselineResult:
        return next(r for r in self.results if r.name == name)


class FirstTurnReading(BaseModel):
    """What the first-turn reader found and how its answer was decided."""

    model_config = ConfigDict(extra="forbid")

    instance: str = Field(description="Instance id.")
    extraction: Extraction = Field(description="Facts (and first reply) read from the first user turn only.")
    asked: bool = Field(description="False when the first turn is the whole input (the verified reading is reused).")
    decided: str = Field(description="'executed' (the tree gave one answer) or why the fallback was used.")


class BaselineReport(BaseModel):
    """The maze_baselines artifact."""

    model_config = ConfigDict(extra="forbid")

    scenarios: list[ScenarioBaselines] = Field(description="Per scenario, LRS first.")
    first_turn: list[FirstTurnReading] = Field(description="The first-turn reader's findings per instance.")
