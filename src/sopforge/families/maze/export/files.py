"""Writing the SOP-Maze export under ``exports/<run id>/maze/``.

Per scenario (``<scenario name>/``): ``prompt_template.txt`` (the four-part prompt with a
``{{user_input}}`` placeholder), ``schema.json``, ``exclusion_keys.json``, ``scenario.json`` (the
tree), ``instances.jsonl`` and ``raw_data.json`` (the authors' record layout: ``input``,
``target``, ``json_schema``, ``no_required_eval_acc_keys``, so their scorer runs on it). For the
whole set: ``instances.jsonl``, ``instances.parquet`` and ``metadata.json``. The folder is built
beside the final one and renamed into place, so a crash never leaves half an export.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sopforge.families.maze.export.task_prompt import task_prompt
from sopforge.families.maze.models.instances import MazeInstance
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, Scenario

__all__ = ["FOLDER", "instance_record", "write_export"]

FOLDER = "maze"


def instance_record(scenario: Scenario, instance: MazeInstance) -> dict[str, Any]:
    """One exported instance: the prompt the evaluated model gets, the target and how it was built."""
    return {
        "id": instance.id, "scenario": scenario.name, "kind": scenario.kind,
        "input": task_prompt(scenario, instance.user_input), "user_input": instance.user_input,
        "target": instance.target, "json_schema": scenario.answer_schema(),
        "no_required_eval_acc_keys": list(EXCLUSION_KEYS),
        "facts": instance.plan.facts, "path": instance.plan.path, "path_kind": instance.plan.path_kind,
        "features": instance.plan.features,
        "noise": [{"phenomenon": n.phenomenon, "user_turn": n.user_turn, "fact": n.fact} for n in instance.plan.noise],
        "input_format": instance.plan.input_format, "cycles": instance.cycles,
    }


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Targets, facts and schemas differ in shape between scenarios: they are stored as JSON text.
    flat = [{**{k: v for k, v in r.items() if k not in ("target", "json_schema", "facts", "noise")},
             "target": json.dumps(r["target"], ensure_ascii=False), "json_schema": json.dumps(r["json_schema"]),
             "facts": json.dumps(r["facts"], ensure_ascii=False),
             "noise": [n["phenomenon"] for n in r["noise"]]} for r in rows]
    pq.write_table(pa.Table.from_pylist(flat), path)


def write_export(run_dir: Path, scenarios: list[Scenario], instances: list[MazeInstance],
                 metadata: dict[str, Any]) -> dict[str, str]:
    """Write the export; returns what was written (name -> path)."""
    final = run_dir / FOLDER
    staging = run_dir / f".{FOLDER}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    everything = []
    for scenario in scenarios:
        folder = staging / scenario.name
        folder.mkdir()
        (folder / "prompt_template.txt").write_text(task_prompt(scenario), encoding="utf-8")
        _json(folder / "schema.json", scenario.answer_schema())
        _json(folder / "exclusion_keys.json", list(EXCLUSION_KEYS))
        _json(folder / "scenario.json", scenario.model_dump(mode="json"))
        rows = [instance_record(scenario, i) for i in instances if i.scenario == scenario.name]
        _jsonl(folder / "instances.jsonl", rows)
        _json(folder / "raw_data.json", [{k: r[k] for k in ("input", "target", "json_schema",
                                                              "no_required_eval_acc_keys")} for r in rows])
        everything += rows
    _jsonl(staging / "instances.jsonl", everything)
    _parquet(staging / "instances.parquet", everything)
    _json(staging / "metadata.json", metadata)
    shutil.rmtree(final, ignore_errors=True)
    staging.replace(final)
    written = {"folder": str(final), "instances_jsonl": str(final / "instances.jsonl"),
               "instances_parquet": str(final / "instances.parquet"), "metadata_json": str(final / "metadata.json")}
    written.update({f"scenario:{s.name}": str(final / s.name) for s in scenarios})
    return written
