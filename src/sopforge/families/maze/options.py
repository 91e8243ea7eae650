"""The maze section of a theme file: ``maze:`` (how many instances, which noise, the seed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sopforge.families.maze.models.instances import PHENOMENA

if TYPE_CHECKING:
    from sopforge.theme import ThemeSpec

__all__ = ["DEFAULT_NOISE", "OPTIONS_KEY", "MazeSpec", "maze_options"]

OPTIONS_KEY = "maze"
# Share of instances given each phenomenon; every phenomenon with a share above 0 still appears
# at least once per scenario (when the scenario offers a place for it).
DEFAULT_NOISE: dict[str, float] = {"intent_reversal": 0.3, "sarcasm": 0.25, "disfluency": 0.35, "off_topic": 0.3,
                                   "calculation": 0.5}


class MazeSpec(BaseModel):
    """How many SOP-Maze instances to build per scenario and how noisy their user inputs are."""

    model_config = ConfigDict(extra="forbid")

    lrs_instances: int = Field(5, ge=1, le=200, description="Instances of the LRS (wide) scenario.")
    hrs_instances: int = Field(5, ge=1, le=200, description="Instances of the HRS (deep) scenario.")
    max_turns: int = Field(5, ge=1, le=12, description="Most user turns in an HRS conversation.")
    noise: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_NOISE), description=(
        "Share of instances (0 to 1) given each phenomenon: " + ", ".join(PHENOMENA) + ". Unlisted ones get 0."))
    max_retries: int = Field(1, ge=0, le=5, description="Repair cycles for a user input the independent reader "
                                                        "reads differently, before the instance is dropped.")
    seed: int = Field(0, description="Seed of every sampling choice (facts, paths, noise, formats).")

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
