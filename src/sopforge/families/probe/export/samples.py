"""PROBE exports under ``exports/<run id>/probe/``: one JSON per sample, JSONL/Parquet, metadata.

Layout (docs/families/probe.md, "Exports"):
- ``samples/<sample id>.json``: ``agent_input`` (world model with its available actions, the
  datastore as {id, type, text}, never a label) and ``ground_truth`` (the bottleneck with its type
  and urgency, the true-positive ids, the hard negatives with what was changed, the solver and its
  expected parameters, the T7 checklist) plus every shortcut attack on it and its hardening rounds;
- ``samples.jsonl`` and ``samples.parquet``: the same, one sample per line or row (nested values as
  JSON text in Parquet);
- ``metadata.json``: Table 1's statistics (tokens, actions, documents per sample: min, max, mean,
  std) beside the paper's, the difficulty and bottleneck-type split, the funnel of every stage, the
  attack table against random and the run's provenance.
Every file is written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any


from sopforge.families.probe.models.sets import Sample, SampleSet
from sopforge.tokens import TOKEN_METHOD

__all__ = ["PAPER_TABLE_1", "sample_record", "table_1", "write_export"]

# PROBE Table 1 (seeds/004 L102-108): per-sample statistics of the published set (tiktoken counts).
PAPER_TABLE_1 = {
    "tokens": {"min": 96294, "max": 122098, "mean": 107640.5, "std": 4676.5},
    "actions": {"min": 24, "max": 27, "mean": 25.27, "std": 0.51},
    "documents": {"min": 70, "max": 81, "mean": 79.3, "std": 3.7},
    "samples": 1000, "personas": 235,
}


def sample_record(sample: Sample, documents: dict[str, Any]) -> dict[str, Any]:
    """One sample as exported: what the agent gets, the ground truth, the attacks and the hardening rounds."""
    world = sample.world_model.model_dump(mode="json")
    world["persona"].pop("difficulty", None)
    world["available_actions"] = [a.for_agent() for a in sample.actions]
    hard = [{"id": i, "changed": documents[i].changed, "derived_from": documents[i].note} for i in sample.hard_negatives]
    return {
        "sample_id": sample.sample_id, "persona_id": sample.persona_id, "difficulty": sample.difficulty,
        "agent_input": {"world_model": world, "datastore": [documents[i].for_agent() for i in sample.datastore]},
        "ground_truth": {
            "bottleneck": sample.bottleneck.model_dump(mode="json"), "true_positives": sample.true_positives,
            "action": sample.solver_id, "expected_parameters": sample.expected_parameters,
            "hard_negatives": hard, "checklist": sample.checklist.model_dump(mode="json")},
        "stats": {"documents": len(sample.datastore), "tokens": sample.tokens, "actions": len(sample.actions),
                  "true_positives": len(sample.true_positives), "hardening_rounds": max(len(sample.rounds) - 1, 0)},
        "attacks": [a.model_dump(mode="json") for a in sample.attacks],
        "hardening": [r.model_dump(mode="json") for r in sample.rounds],
    }


def _describe(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values), "mean": round(statistics.fmean(values), 2),
            "std": round(statistics.pstdev(values), 2)} if values else {}


def table_1(sample_set: SampleSet) -> dict[str, Any]:
    """Table-1-style statistics of a sample set, with the splits the paper does not report."""
    samples = sample_set.samples
    return {
        "samples": len(samples), "personas": len({s.persona_id for s in samples}),
        "tokens": _describe([s.tokens for s in samples]),
        "actions": _describe([len(s.actions) for s in samples]),
        "documents": _describe([len(s.datastore) for s in samples]),
        "true_positives": _describe([len(s.true_positives) for s in samples]),
        "difficulty": dict(Counter(s.difficulty for s in samples)),
        "bottleneck_types": dict(Counter(s.bottleneck.type for s in samples)),
        "urgency": dict(Counter(s.bottleneck.urgency for s in samples)),
        "document_types": dict(Counter(sample_set.documents[i].kind for s in samples for i in s.datastore)),
        "token_method": TOKEN_METHOD,
    }


def _atomic(path: Path, write) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; an export is shared, and the rest of it is 0644
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def write_export(folder: Path, sample_set: SampleSet, metadata: dict[str, Any]) -> dict[str, Any]:
    """Write every PROBE file under ``folder`` and return their paths."""
    records = [sample_record(s, sample_set.documents) for s in sample_set.samples]
    files = [_atomic(folder / "samples" / f"{r['sample_id']}.json", lambda p, r=r: p.write_text(_json(r), "utf-8"))
             for r in records]
    jsonl = _atomic(folder / "samples.jsonl", lambda p: p.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8"))
    import pyarrow as pa  # loaded by the export, not by every command that loads the family
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{
        "sample_id": r["sample_id"], "persona_id": r["persona_id"], "difficulty": r["difficulty"],
        "bottleneck": r["ground_truth"]["bottleneck"]["description"],
        "bottleneck_type": r["ground_truth"]["bottleneck"]["type"],
        "urgency": r["ground_truth"]["bottleneck"]["urgency"], "action": r["ground_truth"]["action"],
        "true_positives": r["ground_truth"]["true_positives"], "documents": r["stats"]["documents"],
        "tokens": r["stats"]["tokens"], "actions": r["stats"]["actions"],
        "agent_input": json.dumps(r["agent_input"], ensure_ascii=False),
        "ground_truth": json.dumps(r["ground_truth"], ensure_ascii=False),
        "attacks": json.dumps(r["attacks"], ensure_ascii=False)} for r in records])
    parquet = _atomic(folder / "samples.parquet", lambda p: pq.write_table(table, p))
    meta = _atomic(folder / "metadata.json", lambda p: p.write_text(_json(metadata), "utf-8"))
    return {"sample_files": [str(f) for f in files], "samples_jsonl": str(jsonl), "samples_parquet": str(parquet),
            "metadata_json": str(meta)}
