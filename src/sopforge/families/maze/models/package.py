"""The maze_package artifact: where the export went and what it holds."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["MazePackage"]


class MazePackage(BaseModel):
    """What maze_package wrote and the numbers the run summary prints."""

    export_dir: str = Field(description="exports/<run id>/maze.")
    files: dict[str, str] = Field(description="Name -> path of every written file or folder.")
    stats: dict[str, Any] = Field(description="The set's statistics (instances, subtasks, tokens, LRS/HRS split, noise).")
    paper: list[list[str]] = Field(description="(figure, this set, the paper) rows.")
    baselines: list[dict[str, Any]] = Field(description="Per scenario and shortcut: mean score and exact answers.")
    reference_scores: dict[str, float] = Field(description="Scenario -> mean score of the reference answers (must be 1.0).")
    instance_funnel: list[dict[str, Any]] = Field(default_factory=list, description=(
        "The instances funnel, copied for the metadata (not named funnel: the store would count it twice)."))
