"""Runs and stage attempts: ids, prefix lookup, statuses, attempts, LLM accounting, summaries."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import SecretStr

from sopforge.errors import UserError
from sopforge.checks import check


def test_runs_get_short_readable_ids_and_start_running(store, run_id):
    assert re.fullmatch(r"r-[0-9a-f]{10}", run_id)
    run = store.get_run(run_id)
    assert (run.theme, run.theme_slug, run.status) == (
        "pharmacy prescription refills", "pharmacy-prescription-refills", "running")
    assert run.config == {"provider": "scripted", "model": "fake-1", "params": {"temperature": 0.1}}


def test_secrets_in_run_config_never_reach_the_file(store, db_path):
    store.create_run("t", "t", {
        "provider": "anthropic", "anthropic_api_key": SecretStr("sk-ant-SECRET1"),
        "params": {"OPENAI_API_KEY": "sk-SECRET2", "max_tokens": 512},
    })
    run = store.list_runs()[0]
    assert run.config["params"]["max_tokens"] == 512  # ordinary params survive
    assert run.config["anthropic_api_key"] == "[redacted]"
    for f in db_path.parent.iterdir():  # the database and any write-ahead log
        assert b"SECRET" not in f.read_bytes(), f


def test_set_run_status_keeps_flow_run_id_and_updates_error(store, run_id):
    store.set_run_status(run_id, "failed", error="sop: thresholds missing", flow_run_id="flow-1")
    store.set_run_status(run_id, "needs_review", error=None)
    run = store.get_run(run_id)
    assert (run.status, run.error, run.flow_run_id) == ("needs_review", None, "flow-1")
    assert run.updated_at > run.created_at

    with pytest.raises(ValueError, match="run status"):
        store.set_run_status(run_id, "exploded")


def test_get_run_by_unique_prefix_with_or_without_r_dash(store):
    # 17 ids over 16 possible first hex digits: at least two share one (pigeonhole).
    ids = [store.create_run(f"theme {i}", f"theme-{i}", {}) for i in range(17)]
    by_first = defaultdict(list)
    for rid in ids:
        by_first[rid[2]].append(rid)

    shared = next(group for group in by_first.values() if len(group) > 1)
    with pytest.raises(UserError, match="ambiguous") as err:
        store.get_run("r-" + shared[0][2])
    # the message names up to five of the matches, and says when there are more
    named = re.findall(r"r-[0-9a-f]{10}", str(err.value).split("matches", 1)[1])
    assert len(named) == min(len(shared), 5) and set(named) <= set(shared)
    assert str(err.value).endswith(", ...); type more characters") == (len(shared) > 5)

    target = ids[0]
    unique = next(target[:n] for n in range(3, len(target) + 1)
                  if sum(other.startswith(target[:n]) for other in ids) == 1)
    assert store.get_run(unique).id == target
    assert store.get_run(unique[2:]).id == target  # users may drop the "r-"
    assert store.get_run(target).theme == "theme 0"


def test_get_run_unknown_prefix_is_a_one_line_user_error(store, run_id):
    with pytest.raises(UserError, match="no run matches 'r-zzz'") as err:
        store.get_run("r-zzz")
    assert "\n" not in str(err.value)


def test_list_runs_newest_first_with_limit(store):
    ids = [store.create_run(f"t{i}", f"t{i}", {}) for i in range(4)]
    assert [r.id for r in store.list_runs()] == ids[::-1]
    assert [r.id for r in store.list_runs(limit=2)] == ids[:1:-1]


def test_stage_attempts_are_numbered_per_run_and_stage(store, run_id):
    other = store.create_run("loans", "loans", {})
    first = store.start_stage(run_id, "sop")
    store.finish_stage(first, "failed", error="no thresholds")
    second = store.start_stage(run_id, "sop")
    store.start_stage(run_id, "context")
    store.start_stage(other, "sop")

    attempts = {(s.stage, s.attempt): s for s in store.stage_runs_for(run_id)}
    assert set(attempts) == {("sop", 1), ("sop", 2), ("context", 1)}
    assert attempts[("sop", 1)].status == "failed" and attempts[("sop", 1)].error == "no thresholds"
    assert attempts[("sop", 1)].finished_at is not None
    assert attempts[("sop", 2)].id == second and attempts[("sop", 2)].status == "running"
    assert [(s.stage, s.attempt) for s in store.stage_runs_for(other)] == [("sop", 1)]


def test_finish_stage_counts_only_this_attempts_calls(store, run_id, make_call):
    other_run = store.create_run("loans", "loans", {})
    earlier = datetime.now(timezone.utc) - timedelta(hours=1)
    store.record_call(make_call(run_id, "sop", created_at=earlier))  # an earlier attempt's call

    stage_run = store.start_stage(run_id, "sop")
    store.record_call(make_call(run_id, "sop", input_tokens=1000, output_tokens=200, cost_usd=0.5))
    store.record_call(make_call(run_id, "sop", input_tokens=10, output_tokens=2, cost_usd=0.25,
                                error="HTTP 500", response=None))
    store.record_call(make_call(run_id, "schema"))
    store.record_call(make_call(other_run, "sop"))
    store.finish_stage(stage_run, "succeeded")

    (row,) = store.stage_runs_for(run_id)
    assert (row.llm_calls, row.input_tokens, row.output_tokens) == (2, 1010, 202)
    assert row.cost_usd == pytest.approx(0.75)


def test_record_reuse_points_at_an_earlier_runs_artifact(store, run_id, save):
    produced = save(run_id, "context")
    rerun = store.create_run("pharmacy prescription refills", "pharmacy-prescription-refills", {})

    store.record_reuse(rerun, "context", produced.id)

    (row,) = store.stage_runs_for(rerun)
    assert (row.status, row.artifact_id, row.attempt, row.llm_calls) == ("reused", produced.id, 1, 0)
    assert store.artifact_for_stage(rerun, "context").id == produced.id
    with pytest.raises(ValueError, match="unknown artifact"):
        store.record_reuse(rerun, "schema", "a-doesnotexist")


def test_run_summary_reports_each_stage_its_artifact_checks_and_spend(store, run_id, save, make_call):
    earlier = store.create_run("pharmacy prescription refills", "pharmacy-prescription-refills", {})
    context = save(earlier, "context")
    store.record_reuse(run_id, "context", context.id)

    failed_attempt = store.start_stage(run_id, "schema")
    store.record_call(make_call(run_id, "schema"))
    store.finish_stage(failed_attempt, "failed", error="provider down")
    attempt = store.start_stage(run_id, "schema")
    store.record_call(make_call(run_id, "schema", input_tokens=50, output_tokens=5, cost_usd=0.02))
    schema = save(run_id, "schema", parents=[context.id], stage_run_id=attempt, checks=[
        check("schema.unique_names", True, "names unique"),
        check("schema.partitions", True, "both partitions"),
        check("schema.enums", False, "enum without choices", severity="warning"),
    ])
    store.start_stage(run_id, "sop")  # still running

    summary = store.run_summary(run_id[:6])

    assert summary.run.id == run_id
    stages = {s.stage: s for s in summary.stages}
    assert [s.stage for s in summary.stages] == ["context", "schema", "sop"]
    assert (stages["context"].status, stages["context"].artifact_id, stages["context"].llm_calls) == (
        "reused", context.id, 0)
    sch = stages["schema"]
    assert (sch.status, sch.attempts, sch.artifact_id, sch.artifact_version) == ("succeeded", 2, schema.id, 1)
    assert (sch.checks_passed, sch.checks_failed) == (2, 1)
    assert (sch.llm_calls, sch.input_tokens, sch.output_tokens) == (2, 150, 25)
    assert (stages["sop"].status, stages["sop"].artifact_id) == ("running", None)
    assert (summary.llm_calls, summary.input_tokens) == (2, 150)
    assert summary.cost_usd == pytest.approx(0.03)
