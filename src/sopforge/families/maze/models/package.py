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
    noise_table: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Per phenomenon: instances tagged with it and how many of them it changes the answer of."))
    baselines: list[dict[str, Any]] = Field(description="Per scenario and shortcut: mean score and exact answers.")
    baselines_pooled: dict[str, dict[str, float]] = Field(default_factory=dict, description=(
        "Kind -> shortcut -> mean score over every final answer of that kind."))
    max_baseline: float = Field(0.35, description="The gate the pooled means must stay below.")
    reference_scores: dict[str, float] = Field(description="Scenario -> mean score x 100 of the subtask targets (must be 100).")
    instance_funnel: list[dict[str, Any]] = Field(default_factory=list, description=(
        "The instances funnel, copied for the metadata (not named funnel: the store would count it twice)."))
