"""Writing the SOP-Maze export under ``exports/<run id>/maze/``.

Per scenario (``<scenario name>/``): ``prompt_template.txt`` (the four-part prompt with a
``{{user_input}}`` placeholder), ``schema.json``, ``exclusion_keys.json``, ``scenario.json`` (the
tree), ``instances.jsonl`` (one line per dialogue), ``subtasks.jsonl`` (one line per input-target
pair along the dialogue, the paper's evaluation unit, Appendix B.2) and ``raw_data.json`` (the
authors' record layout, one record per subtask: ``input``, ``target``, ``json_schema``,
``no_required_eval_acc_keys``, so their scorer runs on it). For the whole set: the same as JSONL and
Parquet, and ``metadata.json``. The folder is built beside the final one and renamed into place, so
a crash never leaves half an export.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sopforge.families.maze.export.task_prompt import task_prompt
from sopforge.families.maze.models.instances import Extraction, MazeInstance
from sopforge.families.maze.models.scenario import EXCLUSION_KEYS, Scenario
from sopforge.families.maze.verify.instance_checks import known_facts
from sopforge.families.maze.models.execution import compile_logic

__all__ = ["FOLDER", "instance_record", "subtask_records", "write_export"]

FOLDER = "maze"


def _reading(scenario: Scenario, extraction: Extraction, turn: int) -> dict[str, Any]:
    """What the independent reader found by the end of user turn ``turn`` (facts the tree can use)."""
    logic = compile_logic(scenario)
    return {"facts": known_facts(logic, Extraction(turns=extraction.turns[:turn])),
            "replies": [r.strip().lower() for r in extraction.replies[:turn]] if scenario.kind == "HRS" else []}


def instance_record(scenario: Scenario, instance: MazeInstance) -> dict[str, Any]:
    """One exported dialogue: the prompt the evaluated model gets, the final target and how it was built."""
    plan = instance.plan
    return {
        "id": instance.id, "scenario": scenario.name, "kind": scenario.kind, "task_type": scenario.task_type,
        "input": task_prompt(scenario, instance.user_input), "user_input": instance.user_input,
        "target": instance.target, "json_schema": scenario.answer_schema(),
        "no_required_eval_acc_keys": list(EXCLUSION_KEYS),
        "facts": plan.facts, "reading": _reading(scenario, instance.extraction, len(plan.turns)),
        "questions": [t.question for t in plan.turns] if scenario.kind == "HRS" else [],
        "path": plan.path, "path_kind": plan.path_kind, "features": plan.features,
        "subtasks": [s.turn for s in plan.subtasks], "user_turns": len(plan.turns),
        "noise": [{"phenomenon": n.phenomenon, "user_turn": n.user_turn, "fact": n.fact, "decoy": n.decoy,
                   "decoy_turn": n.decoy_turn, "operands": n.operands, "misread": n.misread,
                   "changes_answer": n.changes_answer} for n in plan.noise],
        "input_format": plan.input_format, "call_date": plan.call_date, "cycles": instance.cycles,
    }


def subtask_records(scenario: Scenario, instance: MazeInstance) -> list[dict[str, Any]]:
    """One exported input-target pair per subtask of ``instance`` (the input ends with that user turn)."""
    plan = instance.plan
    records = []
    for sub in plan.subtasks:
        user_input = instance.subtask_input(sub.turn)
        records.append({
            "id": f"{instance.id}#t{sub.turn}", "instance": instance.id, "scenario": scenario.name,
            "kind": scenario.kind, "turn": sub.turn, "final": sub.final,
            "input": task_prompt(scenario, user_input), "user_input": user_input, "target": sub.target,
            "json_schema": scenario.answer_schema(), "no_required_eval_acc_keys": list(EXCLUSION_KEYS),
            "facts": sub.facts, "reading": _reading(scenario, instance.extraction, sub.turn),
            "questions": [t.question for t in plan.turns[:sub.turn]] if scenario.kind == "HRS" else [],
            "turns": [t.model_dump() for t in instance.dialogue.prefix(sub.turn).turns],
        })
    return records


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


_AS_TEXT = ("target", "json_schema", "facts", "reading", "noise", "turns", "questions")


def _parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Targets, facts, schemas and readings differ in shape between scenarios: they are stored as JSON text.
    flat = [{k: (json.dumps(v, ensure_ascii=False) if k in _AS_TEXT else v) for k, v in r.items()} for r in rows]
    pq.write_table(pa.Table.from_pylist(flat), path)


def write_export(run_dir: Path, scenarios: list[Scenario], instances: list[MazeInstance],
                 metadata: dict[str, Any]) -> dict[str, str]:
    """Write the export; returns what was written (name -> path)."""
    final = run_dir / FOLDER
    staging = run_dir / f".{FOLDER}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    every_instance, every_subtask = [], []
    for scenario in scenarios:
        folder = staging / scenario.name
        folder.mkdir()
        (folder / "prompt_template.txt").write_text(task_prompt(scenario), encoding="utf-8")
        _json(folder / "schema.json", scenario.answer_schema())
        _json(folder / "exclusion_keys.json", list(EXCLUSION_KEYS))
        _json(folder / "scenario.json", scenario.model_dump(mode="json"))
        mine = [i for i in instances if i.scenario == scenario.name]
        rows = [instance_record(scenario, i) for i in mine]
        subtasks = [r for i in mine for r in subtask_records(scenario, i)]
        _jsonl(folder / "instances.jsonl", rows)
        _jsonl(folder / "subtasks.jsonl", subtasks)
        _json(folder / "raw_data.json", [{k: r[k] for k in ("input", "target", "json_schema",
                                                              "no_required_eval_acc_keys")} for r in subtasks])
        every_instance += rows
        every_subtask += subtasks
    _jsonl(staging / "instances.jsonl", every_instance)
    _parquet(staging / "instances.parquet", every_instance)
    _jsonl(staging / "subtasks.jsonl", every_subtask)
    _parquet(staging / "subtasks.parquet", every_subtask)
    _json(staging / "metadata.json", metadata)
    shutil.rmtree(final, ignore_errors=True)
    staging.replace(final)
    written = {"folder": str(final), "instances_jsonl": str(final / "instances.jsonl"),
               "instances_parquet": str(final / "instances.parquet"), "subtasks_jsonl": str(final / "subtasks.jsonl"),
               "subtasks_parquet": str(final / "subtasks.parquet"), "metadata_json": str(final / "metadata.json")}
    written.update({f"scenario:{s.name}": str(final / s.name) for s in scenarios})
    return written
