"""Tasks as JSONL and Parquet with provenance; both read back to the same tasks."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from sopforge.families.sop_tools.export.tables import (
    parquet_schema, ArtifactRef, Provenance, tasks_from_rows, write_tasks_jsonl, write_tasks_parquet,
)

PROVENANCE = Provenance(
    run_id="run-7", benchmark="loan_triage", theme="small personal loans", generator="sopforge 0.1.0",
    artifacts=[
        ArtifactRef(stage="sop", artifact_id="a-sop", version=2, content_hash="c1", template_id="sop_bench/sop",
                    template_hash="t1", model="claude-x"),
        ArtifactRef(stage="dataset", artifact_id="a-data", version=1, content_hash="c2"),
    ],
)


def tasks() -> list[dict]:
    return [
        {"task_id": "0", "inputs": {"application_id": "A-0001", "requested_amount": 12000},
         "hidden": {"credit_score": 742, "dti_ratio": 0.21}, "expected_outputs": {"final_decision": "approve"},
         "expected_calls": [{"tool": "getCreditScore", "input": {"application_id": "A-0001"}},
                            {"tool": "getDebtToIncome", "input": {"application_id": "A-0001"}}]},
        {"task_id": "1", "inputs": {"application_id": "A-0002", "requested_amount": 30000},
         "hidden": {"credit_score": 655, "dti_ratio": 0.41}, "expected_outputs": {"final_decision": "refer"},
         "expected_calls": [{"tool": "getCreditScore", "input": {"application_id": "A-0002"}}]},
    ]


def test_jsonl_holds_each_task_with_its_provenance(tmp_path: Path):
    path = write_tasks_jsonl(tmp_path / "tasks.jsonl", tasks(), PROVENANCE)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["task_id"] for line in lines] == ["0", "1"]
    first = lines[0]
    assert first["inputs"] == tasks()[0]["inputs"] and first["expected_calls"] == tasks()[0]["expected_calls"]
    assert first["run_id"] == "run-7" and first["benchmark"] == "loan_triage"
    assert first["artifacts"][0] == {"stage": "sop", "artifact_id": "a-sop", "version": 2, "content_hash": "c1",
                                     "template_id": "sop_bench/sop", "template_hash": "t1", "model": "claude-x"}
    assert first["expected_tools"] == ["getCreditScore", "getDebtToIncome"] and first["num_expected_calls"] == 2
    assert first["provenance_hash"] == PROVENANCE.digest() and len(first["task_hash"]) == 64
    assert lines[0]["task_hash"] != lines[1]["task_hash"]


def test_parquet_round_trips_and_is_queryable_with_duckdb(tmp_path: Path):
    path = write_tasks_parquet(tmp_path / "tasks.parquet", tasks(), PROVENANCE)
    table = pq.read_table(path)
    assert table.schema.equals(parquet_schema())
    rows = table.to_pylist()
    assert [json.loads(r["expected_outputs"]) for r in rows] == [t["expected_outputs"] for t in tasks()]
    assert json.loads(rows[1]["hidden"]) == {"credit_score": 655, "dti_ratio": 0.41}
    models = duckdb.sql(f"SELECT DISTINCT a.model FROM (SELECT unnest(artifacts) AS a FROM '{path}') "
                        "WHERE a.model IS NOT NULL").fetchall()
    assert models == [("claude-x",)]
    assert duckdb.sql(f"SELECT sum(num_expected_calls) FROM '{path}'").fetchall() == [(3,)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_tasks_from_rows_split_the_columns_by_role():
    rows = [{"application_id": "A-0001", "credit_score": 742, "final_decision": "approve"}]
    [task] = tasks_from_rows(rows, input_columns=["application_id"], output_columns=["final_decision"])
    assert task == {"task_id": "0", "inputs": {"application_id": "A-0001"}, "hidden": {"credit_score": 742},
                    "expected_outputs": {"final_decision": "approve"}, "expected_calls": []}


@pytest.mark.parametrize("change, message", [
    (lambda ts: ts[1].update(task_id="0"), "used twice"),
    (lambda ts: ts[0].pop("hidden"), "lacks hidden"),
    (lambda ts: ts[0].update(expected_calls=[{"input": {}}]), "expected_calls"),
])
def test_malformed_tasks_are_refused_and_nothing_is_written(tmp_path: Path, change, message):
    ts = tasks()
    change(ts)
    with pytest.raises(ValueError, match=message):
        write_tasks_parquet(tmp_path / "tasks.parquet", ts, PROVENANCE)
    assert not list(tmp_path.iterdir())


def test_task_files_get_the_same_mode_as_any_other_exported_file(tmp_path: Path):
    """mkstemp made them 0600 while the rest of the export was 0644: unreadable for a shared group."""
    usual = tmp_path / "metadata.json"
    usual.write_text("{}")
    for path in (write_tasks_jsonl(tmp_path / "tasks.jsonl", tasks(), PROVENANCE),
                 write_tasks_parquet(tmp_path / "tasks.parquet", tasks(), PROVENANCE)):
        assert path.stat().st_mode & 0o777 == usual.stat().st_mode & 0o777, path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metadata.json", "tasks.jsonl", "tasks.parquet"]
