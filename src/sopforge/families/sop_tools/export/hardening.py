"""Exports of the hardening stages (issue 5): registry variants, SOP variants, the TOD-style JSONL.

Layout, next to the SOP-Bench files of ``<exports>/<run>/<slug>/``:

- ``registry/minimal/toolspecs.json``: only the tools the SOP needs;
  ``registry/with_distractors/toolspecs.json``: the same plus every kept distractor tool (the
  folder's own ``toolspecs.json`` is this one). Both work with the folder's ``tools.py``, so the
  registry-bloat ablation SOP-Bench reports (26 tools vs the 6 needed, L401) runs on any domain
  by swapping one file.
- ``sop_variants/<type>.txt`` and ``<type>.diff``: each kept variant and its diff against
  ``sop.txt``. Agents are given a variant; the answers in the CSV still come from ``sop.txt``.

And in ``<exports>/<run>/``: ``tod_procbench.jsonl``, one record per line, ``record_type`` =
``instruction_document`` (f1/f2/f3 and every statement id), ``compliance_item`` (the balanced
compliant/violating set, TOD-ProcBench task 2; docs/hardening/compliance.md), ``task1_item`` and
``task3_item`` (tasks 1 and 3, from the dialogues; docs/evaluation.md).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from sopforge.families.sop_tools.models.compliance import document_id
from sopforge.families.sop_tools.models.distractors import DistractorSet
from sopforge.families.sop_tools.models.manipulations import ManipulationSet

__all__ = ["REGISTRY_LEVELS", "TOD_JSONL", "write_registry_variants", "write_sop_variants", "write_tod_jsonl",
           "hardening_metadata"]

REGISTRY_LEVELS = ("minimal", "with_distractors")
TOD_JSONL = "tod_procbench.jsonl"


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_registry_variants(folder: Path, base_specs: list[dict], distractors: DistractorSet) -> dict[str, str]:
    """Write one toolspecs.json per registry level; returns level -> path relative to ``folder``."""
    levels = {"minimal": base_specs, "with_distractors": distractors.exported_toolspecs(base_specs)}
    written = {}
    for level, specs in levels.items():
        relative = f"registry/{level}/toolspecs.json"
        _write_json(folder / relative, specs)
        written[level] = relative
    return written


def write_sop_variants(folder: Path, manipulations: ManipulationSet) -> list[dict[str, Any]]:
    """Write every kept variant and its diff; returns their metadata entries."""
    entries = []
    for variant in manipulations.variants:
        text_file, diff_file = f"sop_variants/{variant.variant_type}.txt", f"sop_variants/{variant.variant_type}.diff"
        (folder / text_file).parent.mkdir(parents=True, exist_ok=True)
        (folder / text_file).write_text(variant.text.rstrip("\n") + "\n", encoding="utf-8")
        (folder / diff_file).write_text(variant.diff, encoding="utf-8")
        entries.append({"type": variant.variant_type, "paper": variant.paper, "sop": text_file, "diff": diff_file,
                        "cycles": variant.cycles, "judge": variant.verdict.reason})
    return entries


def write_tod_jsonl(path: Path, benchmark: str, manipulations: ManipulationSet, run_id: str) -> Path:
    """The instruction document, every compliance item and the task 1 and 3 items, one JSON object per line
    (temp file, then rename)."""
    records = []
    if manipulations.instructions is not None:
        records.append(manipulations.instructions.to_record(document_id(benchmark)))
    records += [item.to_record() for item in manipulations.compliance]
    records = [{"benchmark": benchmark, "run_id": run_id, **r} for r in records]
    records += dialogue_records(manipulations, benchmark, run_id)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
    return path


def dialogue_records(manipulations: ManipulationSet, benchmark: str, run_id: str) -> list[dict[str, Any]]:
    """TOD-ProcBench task 1 and task 3 instances from the run's dialogues (those whose section was extracted):
    a task 1 item is the dialogue before its final agent turn with the gold section and the actions that
    turn carries out; a task 3 item the same prefix with the section as the policy and the turn as the reference."""
    records = []
    for dialogue in manipulations.dialogues:
        if not dialogue.section_id or not dialogue.section_f1:
            continue
        common = {"benchmark": benchmark, "run_id": run_id, "item_id": dialogue.task_id, "task_id": dialogue.task_id,
                  "document_id": document_id(benchmark), "prefix": [t.line() for t in dialogue.prefix]}
        records.append({**common, "record_type": "task1_item", "gold_section_id": dialogue.section_id,
                        "gold_actions": list(dialogue.followed)})
        records.append({**common, "record_type": "task3_item", "section_id": dialogue.section_id,
                        "policy": dialogue.section_f1, "reference_response": dialogue.response})
    return records


def hardening_metadata(distractors: DistractorSet, manipulations: ManipulationSet,
                       registry: dict[str, str], variants: list[dict[str, Any]]) -> dict[str, Any]:
    """What metadata.json says about distractors and manipulations (SOP-Bench item 12: recorded in metadata)."""
    labels = [item.label for item in manipulations.compliance]
    violating = [item.manipulation_type for item in manipulations.compliance if item.label == "violating"]
    return {
        "distractor_tools": [{"name": t.name, "kind": t.kind} for t in distractors.kept_tools()],
        "distractor_columns": distractors.distractor_columns(),
        "registry": registry,
        "sop_variants": variants,
        "compliance": {"items": len(labels), "compliant": labels.count("compliant"),
                       "violating": labels.count("violating"),
                       "by_type": dict(Counter(violating))},
        "funnel": [r.model_dump() for r in distractors.funnel + manipulations.funnel],
        "drops": [d.model_dump() for d in distractors.drops + manipulations.drops],
    }
