"""The maze section of a theme file: ``maze:`` (how many instances, which noise, the seed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sopforge.families.maze.models.instances import PHENOMENA
from sopforge.families.maze.models.scenario import HRS_TASK_TYPES, LRS_TASK_TYPES

if TYPE_CHECKING:
    from sopforge.theme import ThemeSpec

__all__ = ["DEFAULT_NOISE", "OPTIONS_KEY", "MazeSpec", "maze_options", "task_types"]

OPTIONS_KEY = "maze"
# Share of instances given each phenomenon; every phenomenon with a share above 0 still appears
# at least once per scenario (when the scenario offers a place for it).
DEFAULT_NOISE: dict[str, float] = {"intent_reversal": 0.3, "sarcasm": 0.25, "disfluency": 0.35, "off_topic": 0.3,
                                   "calculation": 0.5}


class MazeSpec(BaseModel):
    """How many SOP-Maze scenarios and instances to build and how noisy their user inputs are."""

    model_config = ConfigDict(extra="forbid")

    lrs_scenarios: int = Field(3, ge=1, le=13, description="LRS (wide) scenarios, each of its own task type.")
    hrs_scenarios: int = Field(2, ge=1, le=10, description="HRS (deep) scenarios, each of its own kind of call.")
    lrs_task_types: list[str] = Field(default_factory=lambda: list(LRS_TASK_TYPES), description=(
        "Task types given to the LRS scenarios in turn: " + ", ".join(LRS_TASK_TYPES) + "."))
    hrs_task_types: list[str] = Field(default_factory=lambda: list(HRS_TASK_TYPES), description=(
        "Kinds of call given to the HRS scenarios in turn: " + ", ".join(HRS_TASK_TYPES) + "."))
    lrs_instances: int = Field(6, ge=1, le=200, description="Instances of each LRS scenario.")
    hrs_instances: int = Field(6, ge=1, le=200, description="Instances of each HRS scenario.")
    max_turns: int = Field(5, ge=2, le=12, description="Most user turns in an HRS conversation.")
    noise: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_NOISE), description=(
        "Share of instances (0 to 1) given each phenomenon: " + ", ".join(PHENOMENA) + ". Unlisted ones get 0."))
    max_retries: int = Field(1, ge=0, le=5, description="Repair cycles for a user input the independent reader "
                                                        "reads differently, before the instance is dropped.")
    seed: int = Field(0, description="Seed of every sampling choice (facts, paths, noise, formats).")
    max_baseline: float = Field(0.35, gt=0.2, le=1.0, description=(
        "The release gate: every shortcut baseline's mean score per kind (LRS, HRS) must stay below this "
        "(0.2 is the format-only credit; the paper's models score 20-32 on LRS)."))

    @field_validator("lrs_task_types", "hrs_task_types")
    @classmethod
    def _known_types(cls, value: list[str], info) -> list[str]:
        known = LRS_TASK_TYPES if info.field_name == "lrs_task_types" else HRS_TASK_TYPES
        unknown = [t for t in value if t not in known]
        if unknown or not value:
            raise ValueError(f"unknown task type {unknown[0]!r}: choose from {', '.join(known)}" if unknown
                             else "give at least one task type")
        return value

    @field_validator("noise")
    @classmethod
    def _known_phenomena(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = [k for k in value if k not in PHENOMENA]
        if unknown:
            raise ValueError(f"unknown noise phenomenon {unknown[0]!r}: choose from {', '.join(PHENOMENA)}")
        bad = [k for k, v in value.items() if not 0 <= v <= 1]
        if bad:
            raise ValueError(f"noise share of {bad[0]!r} must be between 0 and 1, not {value[bad[0]]}")
        return {k: float(value.get(k, 0.0)) for k in PHENOMENA}


def maze_options(spec: "ThemeSpec") -> MazeSpec:
    """The theme's ``maze:`` section, defaults filled in."""
    return MazeSpec.model_validate(spec.options.get(OPTIONS_KEY, {}))


def task_types(opts: MazeSpec, kind: str) -> list[str]:
    """The task type of each scenario of ``kind``, in order (the list is taken in turn)."""
    types, count = (opts.lrs_task_types, opts.lrs_scenarios) if kind == "LRS" else (opts.hrs_task_types,
                                                                                     opts.hrs_scenarios)
    return [types[i % len(types)] for i in range(count)]
