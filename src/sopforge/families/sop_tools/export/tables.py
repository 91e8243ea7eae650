"""Tasks as JSONL and Parquet, each row carrying its full provenance.

A task is a plain dict ``{task_id, inputs, hidden, expected_outputs, expected_calls}``, optionally
with ``expected_state`` and ``order_constraints`` (the ground-truth stage produces them; this module
does not depend on its models). Provenance
says where every task came from: the run, and for each stage artifact its id, version,
content hash, prompt template id/hash and model — the same fields as the store's
``artifacts`` table, so a row can be joined back to it.

Parquet layout (one row per task): scalar columns for the identity and provenance, the
domain-specific dicts as JSON text (their keys differ per domain, so a fixed struct type
would not fit), ``expected_tools`` (the expected path) and ``expected_writes`` (the tables the
expected state touches) as ``list<string>`` for SQL, and ``artifacts`` as
``list<struct<stage, artifact_id, version, content_hash, template_id, template_hash, model>>``
(DuckDB: ``SELECT unnest(artifacts) FROM 'tasks.parquet'``). Files are written to a temp
name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from functools import cache
from typing import Any, Iterable

from pydantic import BaseModel, Field

__all__ = ["ArtifactRef", "parquet_schema", "Provenance", "task_records", "tasks_from_rows", "write_tasks_jsonl",
           "write_tasks_parquet"]

_TASK_KEYS = ("task_id", "inputs", "hidden", "expected_outputs", "expected_calls")


class ArtifactRef(BaseModel):
    """One stage artifact a benchmark was built from (a row of the store's ``artifacts`` table)."""

    stage: str = Field(description="Stage name, e.g. 'sop' or 'tools'.")
    artifact_id: str = Field(description="artifacts.id")
    version: int | None = Field(None, description="artifacts.version")
    content_hash: str | None = Field(None, description="sha256 of the artifact content.")
    template_id: str | None = Field(None, description="Prompt template that produced it.")
    template_hash: str | None = Field(None, description="sha256 of the rendered template source.")
    model: str | None = Field(None, description="LLM that produced it (None for deterministic stages).")


class Provenance(BaseModel):
    """Where an export came from; repeated on every task row."""

    run_id: str = Field(description="runs.id of the generating run.")
    benchmark: str = Field(description="Benchmark name (the SOP-Bench folder name).")
    theme: str | None = Field(None, description="The business theme of the run.")
    generator: str | None = Field(None, description="sopforge version string.")
    artifacts: list[ArtifactRef] = Field(default_factory=list, description="Every artifact the export depends on.")

    def digest(self) -> str:
        """sha256 of the canonical JSON, to group rows by identical provenance."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


@cache
def parquet_schema():
    """The tasks table's Arrow schema (pyarrow loads here: 0.2 s that reading commands need not pay)."""
    import pyarrow as pa

    return pa.schema([
        ("task_id", pa.string()),
        ("row_index", pa.int64()),
        ("benchmark", pa.string()),
        ("run_id", pa.string()),
        ("theme", pa.string()),
        ("generator", pa.string()),
        ("provenance_hash", pa.string()),
        ("task_hash", pa.string()),
        ("inputs", pa.string()),
        ("hidden", pa.string()),
        ("expected_outputs", pa.string()),
        ("expected_calls", pa.string()),
        ("expected_tools", pa.list_(pa.string())),
        ("num_expected_calls", pa.int32()),
        ("expected_state", pa.string()),
        ("expected_writes", pa.list_(pa.string())),
        ("order_constraints", pa.string()),
        ("artifacts", pa.list_(pa.struct([
            ("stage", pa.string()), ("artifact_id", pa.string()), ("version", pa.int64()),
            ("content_hash", pa.string()), ("template_id", pa.string()), ("template_hash", pa.string()),
            ("model", pa.string()),
        ]))),
    ])


def tasks_from_rows(rows: list[dict[str, Any]], *, input_columns: list[str], output_columns: list[str],
                    expected_calls: list[list[dict]] | None = None) -> list[dict[str, Any]]:
    """Task dicts from exported rows; ``task_id`` is the 0-based row position, as in SOP-Bench."""
    tasks = []
    for i, row in enumerate(rows):
        tasks.append({
            "task_id": str(i),
            "inputs": {c: row[c] for c in input_columns},
            "hidden": {c: v for c, v in row.items() if c not in input_columns and c not in output_columns},
            "expected_outputs": {c: row[c] for c in output_columns},
            "expected_calls": list(expected_calls[i]) if expected_calls else [],
        })
    return tasks


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))


def _validate(tasks: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            raise ValueError(f"task {i} is not a dict")
        missing = [k for k in _TASK_KEYS if k not in t]
        if missing:
            raise ValueError(f"task {i} lacks {', '.join(missing)}")
        tid = str(t["task_id"])
        if tid in seen:
            raise ValueError(f"task_id {tid!r} is used twice")
        seen.add(tid)
        for key in ("inputs", "hidden", "expected_outputs"):
            if not isinstance(t[key], dict):
                raise ValueError(f"task {tid}: {key} must be a dict")
        calls = t["expected_calls"]
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("tool"), str)
                                                  for c in calls):
            raise ValueError(f"task {tid}: expected_calls must be a list of {{'tool': name, 'input': {{...}}}}")


def task_records(tasks: list[dict[str, Any]], provenance: Provenance) -> list[dict[str, Any]]:
    """One flat record per task (dict values kept as objects), in the order given.

    Raises:
        ValueError: a task lacks a key, has the wrong shape, or repeats a task_id.
    """
    _validate(tasks)
    prov = provenance.model_dump(mode="json")
    digest = provenance.digest()
    records = []
    for i, t in enumerate(tasks):
        body = {k: t[k] for k in _TASK_KEYS}
        body["task_id"] = str(t["task_id"])
        records.append({
            "task_id": body["task_id"], "row_index": i, "benchmark": provenance.benchmark,
            "run_id": provenance.run_id, "theme": provenance.theme, "generator": provenance.generator,
            "provenance_hash": digest, "task_hash": hashlib.sha256(_canonical(body).encode()).hexdigest(),
            "inputs": t["inputs"], "hidden": t["hidden"], "expected_outputs": t["expected_outputs"],
            "expected_calls": t["expected_calls"], "expected_tools": [c["tool"] for c in t["expected_calls"]],
            "num_expected_calls": len(t["expected_calls"]), "expected_state": t.get("expected_state") or {},
            "expected_writes": sorted(t.get("expected_state") or {}),
            "order_constraints": t.get("order_constraints") or [], "artifacts": prov["artifacts"],
        })
    return records


def _atomic_write(path: Path, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique name created by the writer itself, not mkstemp: mkstemp's files are 0600, and the
    # export's other files get the usual mode (0644 under the common umask).
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_tasks_jsonl(path: Path, tasks: list[dict[str, Any]], provenance: Provenance) -> Path:
    """Write one JSON object per line (UTF-8, keys in a fixed order); returns ``path``."""
    records = task_records(tasks, provenance)

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
    return _atomic_write(path, write)


def _json_columns(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        row = dict(r)
        for key in ("inputs", "hidden", "expected_outputs", "expected_calls", "expected_state", "order_constraints"):
            row[key] = _canonical(row[key])
        out.append(row)
    return out


def write_tasks_parquet(path: Path, tasks: list[dict[str, Any]], provenance: Provenance) -> Path:
    """Write the tasks as Parquet with :func:`parquet_schema`; returns ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _json_columns(task_records(tasks, provenance))
    table = pa.Table.from_pylist(records, schema=parquet_schema())
    return _atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
