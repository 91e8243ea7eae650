"""Shortcut baselines per scenario: the artifact of maze_baselines.

A benchmark item only measures SOP-following when reading the whole input and applying the SOP is
necessary. Four shortcuts skip part of that (:mod:`..verify.shortcuts`): the leave-one-out
``majority`` answer, a reader of the ``first_turn`` only, a reader of the ``last_turn`` only, and the
SOP's ``first_option``. Each is scored like a model with the family's scorer, on every instance's
final answer (where a shortcut that reads part of the input means something) and, for the two that
read nothing, on every subtask. On wide tasks the paper's models sit near the format-only credit
0.2 (Table 5); the gate keeps every shortcut below ``maze.max_baseline`` (0.35) per kind.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sopforge.families.maze.models.instances import Extraction

__all__ = ["BASELINES", "BaselineReport", "BaselineResult", "ScenarioBaselines", "ShortcutReading"]

BASELINES: tuple[str, ...] = ("majority", "first_turn", "last_turn", "first_option")
Shortcut = Literal["majority", "first_turn", "last_turn", "first_option"]


class BaselineResult(BaseModel):
    """One shortcut on one scenario."""

    model_config = ConfigDict(extra="forbid")

    name: Shortcut = Field(description="Which shortcut.")
    answers: dict[str, dict[str, Any]] = Field(description="Instance id -> the shortcut's final answer.")
    scores: dict[str, float] = Field(description="Instance id -> score of the final answer (1.0 / 0.2 / 0).")
    mean: float = Field(description="Mean score over the instances' final answers (0 to 1).")
    correct: int = Field(description="Instances the shortcut answers exactly.")
    subtask_mean: float | None = Field(None, description=(
        "Mean score over every subtask (majority and first_option only; None for the readers)."))


class ScenarioBaselines(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(description="Scenario name.")
    kind: Literal["LRS", "HRS"] = Field(description="Scenario kind.")
    instances: int = Field(description="Instances scored.")
    subtasks: int = Field(0, description="Subtasks scored by the majority and first-option shortcuts.")
    results: list[BaselineResult] = Field(description="One result per shortcut, in BASELINES order.")

    def result(self, name: str) -> BaselineResult:
        return next(r for r in self.results if r.name == name)


class ShortcutReading(BaseModel):
    """What a shortcut reader found in the part of the input it reads, and how its answer was decided."""

    model_config = ConfigDict(extra="forbid")

    instance: str = Field(description="Instance id.")
    shortcut: Literal["first_turn", "last_turn"] = Field(description="Which reader.")
    extraction: Extraction = Field(description="What it read.")
    asked: bool = Field(description="False when that part is the whole input (the verified reading is reused).")
    decided: str = Field(description="'executed' (the tree gave one answer) or why the fallback was used.")


class BaselineReport(BaseModel):
    """The maze_baselines artifact."""

    model_config = ConfigDict(extra="forbid")

    scenarios: list[ScenarioBaselines] = Field(description="Per scenario, LRS ones first.")
    readings: list[ShortcutReading] = Field(default_factory=list, description="The shortcut readers' findings.")
    pooled: dict[str, dict[str, float]] = Field(default_factory=dict, description=(
        "Kind -> shortcut -> mean score over every final answer of that kind (what the gate compares)."))
    max_baseline: float = Field(0.35, description="The gate: every pooled mean must stay below it.")

    def too_high(self) -> list[str]:
        """'<kind> <shortcut> <mean>' for every pooled mean at or above the gate."""
        return [f"{kind} {name} {mean:.2f}" for kind, means in self.pooled.items() for name, mean in means.items()
                if mean >= self.max_baseline]
