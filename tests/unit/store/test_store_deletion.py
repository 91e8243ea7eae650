"""Deleting and pruning runs: every row a run owns goes, in one transaction, and no remaining run
loses an artifact its lineage points at."""

from __future__ import annotations

import pytest

from sopforge.checks import check
from sopforge.errors import UserError
from sopforge.funnel import FunnelRow
from sopforge.store import ReviewWrite, Store
from sopforge.store import deletion

TABLES = ("runs", "stage_runs", "artifacts", "artifact_edges", "validations", "dataset_rows", "funnel",
          "llm_calls", "reviews", "review_requests", "eval_runs", "eval_items")


def _count_all(sql) -> dict[str, int]:
    return {t: sql(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


def _full_run(store: Store, save, make_call, theme: str = "t") -> tuple[str, dict[str, str]]:
    """A finished run with a row in every table it can own."""
    run_id = store.create_run(theme, theme, {"provider": "scripted"})
    stage_run = store.start_stage(run_id, "context")
    context = save(run_id, "context", stage_run_id=stage_run, input_key=f"{theme}-context",
                   checks=[check("context.ok", True, "fine")])
    dataset = save(run_id, "dataset", parents=[context.id], input_key=f"{theme}-dataset",
                   rows=[{"row_id": "R-1"}, {"row_id": "R-2"}], row_id_field="row_id",
                   funnel=[FunnelRow(component="distractor_tool", item_type="similar", generated=1, verified=1, kept=1)])
    store.record_call(make_call(run_id, "context"))
    request = store.open_review_request(run_id, "dataset", dataset.id, flow_run_id=None, pause_key="k")
    store.record_review(ReviewWrite(artifact_id=dataset.id, run_id=run_id, decision="approve", source="cli",
                                    close_request_id=request.id))
    store.set_run_status(run_id, "succeeded")
    evaluation = store.create_eval(run_id, {"provider": "scripted", "model": "m", "agent": "fc"}, "key",
                                   artifacts=[dataset.id], export_dir="/exports")
    store.save_item(evaluation, "sop_tools", {"suite": "sop_bench", "agent": "fc", "item_id": "R-1"})
    return run_id, {"context": context.id, "dataset": dataset.id}


def test_deleting_a_run_removes_its_rows_from_every_table_and_nothing_else(store, save, make_call, sql):
    doomed, artifacts = _full_run(store, save, make_call, "doomed")
    _full_run(store, save, make_call, "kept")
    before = _count_all(sql)
    assert all(before[t] == 2 * (before[t] // 2) and before[t] > 0 for t in TABLES), before

    result = store.delete_runs([doomed])
    assert [r.id for r in result.runs] == [doomed] and sorted(result.artifacts) == sorted(artifacts.values())
    assert result.rows == {t: before[t] // 2 for t in result.rows}
    assert _count_all(sql) == {t: before[t] // 2 for t in TABLES}
    assert sql("SELECT count(*) FROM runs WHERE id = ?", [doomed]) == [(0,)]


def test_a_run_another_run_reused_is_refused_then_deleted_with_it(store, save, make_call, sql):
    first, artifacts = _full_run(store, save, make_call)
    second = store.create_run("t", "t", {})
    store.record_reuse(second, "context", artifacts["context"])
    store.set_run_status(second, "succeeded")
    with pytest.raises(UserError) as refused:
        store.delete_runs([first])
    message = str(refused.value)
    assert f"run {first} cannot be deleted" in message and f"run {second} uses its artifacts" in message
    assert artifacts["context"] in message and second in message.split("delete ")[-1]
    assert sql("SELECT count(*) FROM runs") == [(2,)]  # nothing was deleted

    store.delete_runs([first, second])
    assert _count_all(sql) == dict.fromkeys(TABLES, 0)


def test_an_artifact_built_from_this_runs_artifact_is_a_dependency(store, save, make_call):
    first, artifacts = _full_run(store, save, make_call)
    second = store.create_run("t2", "t2", {})
    save(second, "sop", parents=[artifacts["context"]])
    store.set_run_status(second, "failed")
    with pytest.raises(UserError, match=f"run {second} uses its artifacts"):
        store.delete_runs([first])
    store.delete_runs([second])  # the dependent itself can go
    store.delete_runs([first])


def test_a_live_run_is_refused_unless_forced(store, run_id):
    with pytest.raises(UserError, match="still running"):
        store.delete_runs([run_id])
    store.delete_runs([run_id], force=True)
    assert store.list_runs() == []


def test_a_dry_run_counts_and_deletes_nothing(store, save, make_call, sql):
    run_id, _ = _full_run(store, save, make_call)
    before = _count_all(sql)
    result = store.delete_runs([run_id], dry_run=True)
    assert result.rows["artifacts"] == 2 and result.rows["dataset_rows"] == 2
    assert _count_all(sql) == before


def test_a_failure_midway_deletes_nothing(store, save, make_call, sql, monkeypatch):
    run_id, _ = _full_run(store, save, make_call)
    before = _count_all(sql)
    real = deletion._DELETES
    monkeypatch.setattr(deletion, "_DELETES", real[:4] + (("no_such_table", "TRUE"),) + real[4:])
    with pytest.raises(Exception, match="no_such_table"):
        store.delete_runs([run_id])
    assert _count_all(sql) == before


def test_prune_deletes_failed_runs_but_keeps_those_a_later_run_reused(store, save, make_call, sql):
    reused, artifacts = _full_run(store, save, make_call, "reused")
    store.set_run_status(reused, "failed", error="sop: thresholds missing")
    rerun = store.create_run("reused", "reused", {})
    store.record_reuse(rerun, "context", artifacts["context"])
    store.set_run_status(rerun, "succeeded")
    lone, _ = _full_run(store, save, make_call, "lone")
    store.set_run_status(lone, "failed", error="provider down")

    dry = store.prune(["failed"], dry_run=True)
    assert [r.id for r in dry.runs] == [lone] and sql("SELECT count(*) FROM runs") == [(3,)]
    result = store.prune(["failed"])
    assert [r.id for r in result.runs] == [lone]
    assert result.kept == {reused: f"run {rerun} uses its artifacts (context v1 ({artifacts['context']}))"}
    assert sorted(r for (r,) in sql("SELECT id FROM runs")) == sorted([reused, rerun])


def test_prune_refuses_live_statuses(store):
    with pytest.raises(UserError, match="cannot be pruned"):
        store.prune(["running"])
