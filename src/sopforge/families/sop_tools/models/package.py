"""The package artifact: where a domain was exported and how the release gate judged it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PackageManifest(BaseModel):
    """Paths of an export plus the figures a reader reports (SOP-Bench Table 3, TELLER Table 4)."""

    benchmark: str = Field(description="Benchmark name: the SOP-Bench folder name (the theme slug).")
    export_dir: str = Field(description="Folder holding everything exported for the run.")
    sopbench_folder: str = Field(description="The self-contained SOP-Bench folder (sop.txt, toolspecs.json, tools.py, CSVs, metadata.json).")
    tasks_jsonl: str = Field(description="Tasks with full provenance, one JSON object per line.")
    tasks_parquet: str = Field(description="The same tasks as Parquet.")
    metadata_json: str = Field(description="Counts and distributions of the benchmark.")
    stats: dict[str, Any] = Field(description="Tasks, tools, SOP tokens, graph nodes/edges/density, label distribution.")
    coverage: dict[str, dict[str, int]] = Field(description="Decision field → outcome → number of tasks.")
    excluded_rows: int = Field(description="Dataset rows without a valid ground truth (reported, not exported).")
    oracle: dict[str, Any] = Field(description="Oracle agent report on the exported folder: ECR, TSR, failures.")
    tod_jsonl: str | None = Field(None, description="TOD-ProcBench-style JSONL: instruction document and compliance set.")
    hardening: dict[str, int] = Field(default_factory=dict,
                                      description="Kept distractor tools and columns, SOP variants, compliance items.")
    write_tools: list[str] = Field(default_factory=list, description="Tools that change the simulated database.")
    paths: list[dict[str, Any]] = Field(default_factory=list,
                                        description="Path coverage: each distinct expected tool path with its tasks.")
    baselines: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Baseline agents replayed through the exported folder: outputs, final state, order, success."))
    gates: dict[str, float] = Field(default_factory=dict, description="The bounds the release gate applied.")
