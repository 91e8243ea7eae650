"""Artifacts: versions, one-transaction writes, lineage, reuse and plain-SQL access."""

from __future__ import annotations

import pytest

from sopforge.errors import UserError
from sopforge.llm.types import sha256_json
from sopforge.checks import check
from sopforge.store import ArtifactWrite, content_hash
from sopforge.store import queries

ROW_COUNTS = ("SELECT (SELECT count(*) FROM artifacts), (SELECT count(*) FROM artifact_edges), "
              "(SELECT count(*) FROM validations)")


def test_versions_count_per_run_and_stage(store, run_id, save):
    other = store.create_run("loans", "loans", {})
    v1 = save(run_id, "sop")
    v2 = save(run_id, "sop", content={"title": "second"})
    schema = save(run_id, "schema")
    other_sop = save(other, "sop")

    assert (v1.version, v2.version, schema.version, other_sop.version) == (1, 2, 1, 1)
    assert len({v1.id, v2.id, schema.id, other_sop.id}) == 4


def test_a_new_version_supersedes_live_earlier_ones_but_not_rejected_or_approved(store, run_id, save):
    rejected = save(run_id, "sop", status="draft")
    store.set_artifact_status(rejected.id, "rejected")
    validated = save(run_id, "sop")
    approved = save(run_id, "sop", status="approved")
    latest = save(run_id, "sop")

    assert store.get_artifact(rejected.id).status == "rejected"
    assert store.get_artifact(validated.id).status == "superseded"
    assert store.get_artifact(approved.id).status == "approved", "an approval is never silently replaced"
    assert store.get_artifact(latest.id).status == "validated"


def test_content_hash_is_sha256_of_canonical_json(store, run_id, save):
    a = save(run_id, "sop", content={"b": [1, 2], "a": "é"})
    b = save(run_id, "schema", content={"a": "é", "b": [1, 2]})

    assert a.content_hash == b.content_hash == content_hash({"a": "é", "b": [1, 2]})
    assert a.content_hash == sha256_json({"b": [1, 2], "a": "é"})
    assert a.content == {"b": [1, 2], "a": "é"}


def test_save_stores_checks_in_order_and_finishes_the_stage_run(store, run_id, save):
    stage_run = store.start_stage(run_id, "sop")
    art = save(run_id, "sop", stage_run_id=stage_run, checks=[
        check("sop.sections", True, "six sections"),
        check("sop.thresholds", False, "no numeric threshold", found=0),
        check("sop.style", False, "long steps", severity="warning"),
    ])

    stored = store.validations_for(art.id)
    assert [(v.check_name, v.passed, v.severity) for v in stored] == [
        ("sop.sections", True, "error"), ("sop.thresholds", False, "error"), ("sop.style", False, "warning")]
    assert stored[1].details == {"found": 0}
    (row,) = store.stage_runs_for(run_id)
    # A blocking failure makes the stage run fail, and says why.
    assert (row.status, row.artifact_id) == ("failed", art.id)
    assert "sop.thresholds: no numeric threshold" in row.error


def test_more_checks_and_parents_than_one_statement_holds_are_all_stored_in_order(store, run_id, save):
    # insert_rows writes 100 rows per statement: 250 checks and parents span three statements.
    parents = [save(run_id, f"stage{i}").id for i in range(3)]
    checks = [check(f"sop.check{i:03d}", i % 7 != 0, f"message {i}", index=i) for i in range(250)]
    art = save(run_id, "sop", checks=checks, parents=parents * 2)
    stored = store.validations_for(art.id)
    assert [(v.ordinal, v.check_name, v.passed, v.details) for v in stored] == [
        (i, f"sop.check{i:03d}", i % 7 != 0, {"index": i}) for i in range(250)]
    assert len({v.id for v in stored}) == 250
    assert sorted(p.id for p in store.parents_of(art.id)) == sorted(parents)  # each parent once


@pytest.mark.parametrize("broken", ["insert_edges", "insert_validations", "finish_stage_run"])
def test_a_failure_midway_leaves_no_trace(store, run_id, save, sql, monkeypatch, broken):
    context = save(run_id, "context")
    previous = save(run_id, "schema", parents=[context.id], checks=[check("a", True, "ok")])
    stage_run = store.start_stage(run_id, "schema")
    before = sql(ROW_COUNTS)[0]

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(queries, broken, explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save(run_id, "schema", parents=[context.id], stage_run_id=stage_run,
             checks=[check("schema.unique_names", True, "ok")])
    monkeypatch.undo()

    assert sql(ROW_COUNTS)[0] == before
    assert store.get_artifact(previous.id).status == "validated"  # the supersede rolled back too
    assert store.stage_runs_for(run_id)[-1].status == "running"
    assert save(run_id, "schema").version == 2  # the failed write burnt no version number


def test_unserialisable_check_details_fail_before_anything_is_written(store, run_id, save, sql):
    with pytest.raises(ValueError, match="details of check 'schema.odd'"):
        save(run_id, "schema", checks=[check("schema.ok", True, "ok"),
                                       check("schema.odd", False, "odd", offending={1, 2})])
    assert sql(ROW_COUNTS)[0] == (0, 0, 0)


def test_an_unknown_stage_run_at_the_end_rolls_back_the_artifact(store, run_id, save, sql):
    with pytest.raises(ValueError, match="unknown stage run"):
        save(run_id, "schema", stage_run_id="s-nope", checks=[check("a", True, "ok")])
    assert sql(ROW_COUNTS)[0] == (0, 0, 0)


def test_unknown_parent_is_refused(store, run_id, save, sql):
    with pytest.raises(ValueError, match="a-missing"):
        save(run_id, "schema", parents=["a-missing"])
    assert sql(ROW_COUNTS)[0] == (0, 0, 0)


def test_lineage_across_three_generations(store, run_id, save, sql):
    context = save(run_id, "context")
    schema = save(run_id, "schema", parents=[context.id])
    sop = save(run_id, "sop", parents=[context.id, schema.id])
    graph = save(run_id, "api_graph", parents=[schema.id, sop.id])
    unrelated = save(run_id, "dataset", parents=[])

    assert {a.id for a in store.parents_of(sop.id)} == {context.id, schema.id}
    assert {a.id for a in store.descendants_of(context.id)} == {schema.id, sop.id, graph.id}
    assert [a.id for a in store.descendants_of(sop.id)] == [graph.id]
    assert store.descendants_of(graph.id) == []
    assert unrelated.id not in {a.id for a in store.descendants_of(context.id)}

    # "What depends on the SOP, version 1?" as a user writes it in plain SQL.
    rows = sql("""
        WITH RECURSIVE dep(id) AS (
            SELECT child FROM artifact_edges
            WHERE parent = (SELECT id FROM artifacts WHERE stage = 'sop' AND version = 1)
            UNION SELECT e.child FROM artifact_edges e JOIN dep ON e.parent = dep.id)
        SELECT a.stage FROM artifacts a JOIN dep USING (id)""")
    assert rows == [("api_graph",)]


def test_find_reusable_artifact_returns_only_validated_or_approved(store, run_id, save):
    assert store.find_reusable_artifact("sop", "k1") is None
    draft = save(run_id, "sop", input_key="k1", status="draft")
    assert store.find_reusable_artifact("sop", "k1") is None
    store.set_artifact_status(draft.id, "rejected")
    assert store.find_reusable_artifact("sop", "k1") is None

    other_run = store.create_run("t", "t", {})
    validated = save(other_run, "sop", input_key="k1", status="validated")
    assert store.find_reusable_artifact("sop", "k1").id == validated.id
    assert store.find_reusable_artifact("sop", "k2") is None
    assert store.find_reusable_artifact("schema", "k1") is None

    store.set_artifact_status(validated.id, "approved")
    newer = save(other_run, "sop", input_key="k1", status="validated", supersede_previous=False)
    assert store.find_reusable_artifact("sop", "k1").id == validated.id, "an approved version wins over a newer one"
    store.set_artifact_status(newer.id, "superseded")
    with pytest.raises(ValueError, match="approval is final"):
        store.set_artifact_status(validated.id, "superseded")
    assert store.find_reusable_artifact("sop", "k1").id == validated.id


def test_artifact_for_stage_follows_the_latest_attempt(store, run_id, save):
    first = store.start_stage(run_id, "sop")
    v1 = save(run_id, "sop", stage_run_id=first)
    assert store.artifact_for_stage(run_id, "sop").id == v1.id

    second = store.start_stage(run_id, "sop")
    v2 = save(run_id, "sop", stage_run_id=second)
    assert store.artifact_for_stage(run_id, "sop").id == v2.id
    assert store.artifact_for_stage(run_id, "schema") is None


def test_get_artifact_by_prefix_and_unknown(store, run_id, save):
    art = save(run_id, "sop")
    assert store.get_artifact(art.id[:10]).id == art.id
    with pytest.raises(UserError, match="no artifact matches"):
        store.get_artifact("a-zzzz")
    with pytest.raises(ValueError, match="artifact status"):
        store.set_artifact_status(art.id, "lost")


def test_json_columns_are_queryable_with_plain_sql(store, run_id, save, sql):
    save(run_id, "sop", content={"title": "Refill SOP", "steps": [{"id": "5.1.1"}, {"id": "5.1.2"}]},
         checks=[check("sop.fields", False, "unknown field", missing=["dob"])])

    assert sql("SELECT content->>'$.title', json_array_length(content->'$.steps') FROM artifacts") == [
        ("Refill SOP", 2)]
    assert sql("SELECT details->'$.missing'->>0 FROM validations") == [("dob",)]
    assert sql("SELECT config->>'$.model' FROM runs") == [("fake-1",)]


def test_save_artifact_rejects_an_unknown_status():
    with pytest.raises(ValueError):
        ArtifactWrite(run_id="r", stage="s", kind="k", content={}, input_key="k", status="done")


def test_dataset_rows_are_stored_with_their_artifact_in_one_transaction(tmp_path, monkeypatch):
    from sopforge.store import ArtifactWrite, Store
    from sopforge.store import queries

    store = Store(tmp_path / "rows.duckdb")
    run_id = store.create_run("theme", "slug", {})
    rows = [{"request_id": f"RR-{i:03d}", "refills": i} for i in range(300)]
    write = ArtifactWrite(run_id=run_id, stage="dataset", kind="dataset", content={"rows": rows},
                          input_key="k", rows=rows, row_id_field="request_id")
    record = store.save_artifact(write)
    assert store.dataset_rows(record.id) == rows

    def broken_insert(*args, **kwargs):
        raise RuntimeError("disk full while inserting rows")

    monkeypatch.setattr(queries, "insert_dataset_rows", broken_insert)
    with pytest.raises(RuntimeError):
        store.save_artifact(write.model_copy(update={"input_key": "k2"}))
    assert [a.input_key for a in store.artifacts_for_run(run_id)] == ["k"]
