"""Stage 'probe_package': write the PROBE export (deterministic, no LLM) and re-read what it wrote.

Everything goes under ``<exports>/<run id>/probe/`` (see :mod:`sopforge.families.probe.export.samples`):
one JSON per sample, ``samples.jsonl``, ``samples.parquet`` and ``metadata.json`` with Table 1's
statistics beside the paper's, the funnel of every PROBE stage and the attack table against random.
The exported sample files are read back and checked: no label field leaks into ``agent_input``,
and every true positive is in its datastore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopforge.ask import StageResult
from sopforge.checks import check
from sopforge.families.probe.export.samples import PAPER_TABLE_1, table_1, write_export
from sopforge.families.probe.models.sets import ProbeManifest, SampleSet

__all__ = ["EXPORT_FOLDER", "STAGE", "PackageInputs", "run"]

STAGE = "probe_package"
EXPORT_FOLDER = "probe"
_LABELS = ("solves_bottleneck", "true_positive", "hard_negative", "distractor", "ground_truth", "bottleneck_index")


class PackageInputs(BaseModel):
    run_id: str
    theme: str
    theme_slug: str
    samples: SampleSet
    funnels: dict[str, list[dict[str, Any]]] = Field(description="Stage -> its funnel rows.")
    drops: dict[str, list[dict[str, Any]]] = Field(description="Stage -> its dropped items with reasons.")
    provenance: list[dict[str, Any]] = Field(default_factory=list)
    exports_dir: Path


def run(inputs: PackageInputs, **_: object) -> StageResult[ProbeManifest]:
    """Write the export and check it as a consumer would read it."""
    folder = inputs.exports_dir / inputs.run_id / EXPORT_FOLDER
    stats = table_1(inputs.samples)
    metadata = {
        "benchmark": f"{inputs.theme_slug}/probe", "run_id": inputs.run_id, "theme": inputs.theme,
        "table_1": stats, "paper_table_1": PAPER_TABLE_1,
        "shortcut_attacks": {
            "against_random": inputs.samples.attack_table,
            "per_sample": {s.sample_id: [a.model_dump(mode="json") for a in s.attacks] for s in inputs.samples.samples},
            "hardening": {s.sample_id: [r.model_dump(mode="json") for r in s.rounds] for s in inputs.samples.samples},
            "two_sample_tests": [t.model_dump(mode="json") for t in inputs.samples.two_sample_tests]},
        "funnel": inputs.funnels, "drops": inputs.drops, "provenance": inputs.provenance,
    }
    paths = write_export(folder, inputs.samples, metadata)
    leaks, missing = [], []
    for path in paths["sample_files"]:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        shown = json.dumps(record["agent_input"])
        leaks += [f"{record['sample_id']}: {label}" for label in _LABELS if f'"{label}"' in shown]
        ids = {d["id"] for d in record["agent_input"]["datastore"]}
        missing += [f"{record['sample_id']}: {i}" for i in record["ground_truth"]["true_positives"] if i not in ids]
    manifest = ProbeManifest(export_dir=str(folder), stats=stats, **paths)
    return StageResult(artifact=manifest, checks=[
        check(f"{STAGE}.no_labels_in_agent_input", not leaks, f"label fields in what the agent sees: {leaks}",
              ok=f"no label field in what the agent sees ({len(paths['sample_files'])} samples)"),
        check(f"{STAGE}.true_positives_in_datastore", not missing, f"true positives missing from their datastore: {missing}",
              ok=f"every true positive is in its sample's datastore ({len(paths['sample_files'])} samples)"),
    ], template_id="-", template_hash="-", prompt_hash="-", model="-", attempts=1, raw_texts=[])
