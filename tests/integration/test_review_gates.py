"""Review gates end to end: a generation paused at a gate is answered from another terminal.

The generation runs in a background process against the session's Prefect server, the model is
the scripted fake server speaking the OpenAI protocol, and every decision is checked in DuckDB.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from answers import RECORDED_CALLS, by_stage, prompt_text, recorded_answer
from review_support import FAST_POLL, FEEDBACK, ONLY_SOP_GATE, finish, generate_args, reviews, wait_for_gate
from sopforge.llm.testserver import FakeLLMServer

pytestmark = pytest.mark.prefect
def test_paused_run_is_rejected_with_feedback_then_approved_from_the_cli(cli, tmp_path):
    with FakeLLMServer(by_stage()) as server:
        proc = cli.start(*generate_args(server, "--review", "ui", *ONLY_SOP_GATE), env=FAST_POLL)
        run_id = wait_for_gate(cli, "sop", 1, proc)

        shown = cli("review", "show", run_id)
        assert shown.code == 0 and "Main Procedure" in shown.stdout and "checks" in shown.stdout.lower()
        wrong_stage = cli("review", "approve", run_id, "--stage", "tools")
        assert wrong_stage.code == 2 and "waits for review of sop, not tools" in wrong_stage.stderr
        busy = cli("rerun", run_id)
        assert busy.code == 2 and "is paused at a review gate" in busy.stderr
        no_feedback = cli("review", "reject", run_id, "--feedback", "  ")
        assert no_feedback.code == 2 and "reject needs --feedback" in no_feedback.stderr

        # An edit that fails the SOP checks is refused with the reason; the run stays paused at v1.
        bad = tmp_path / "bad_sop.md"
        bad.write_text("1. Purpose\nRefill things.\n")
        refused = cli("review", "edit", run_id, "--file", str(bad))
        assert refused.code == 2 and "edited sop fails" in refused.stderr and "sop.sections_in_order" in refused.stderr
        assert wait_for_gate(cli, "sop", 1, proc) == run_id

        sent = len(server.requests)
        rejected = cli("review", "reject", run_id, "--feedback", FEEDBACK, "--reviewer", "dana")
        assert rejected.code == 0, rejected.stderr
        assert "regenerates sop with your feedback" in rejected.stdout
        wait_for_gate(cli, "sop", 2, proc)
        regenerated = server.requests[sent:]
        assert len(regenerated) == 1 and FEEDBACK in prompt_text(regenerated[0].json, "openai")

        approved = cli("review", "approve", run_id, "--reviewer", "dana")
        assert approved.code == 0 and "the run continues" in approved.stdout
        summary = finish(proc)

    assert summary["status"] == "succeeded" and summary["export"]
    assert reviews(cli, run_id) == [
        ("sop", 1, "reject", "dana", "cli", FEEDBACK),
        ("sop", 2, "approve", "dana", "cli", None),
    ]
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        statuses = con.execute("SELECT version, status FROM artifacts WHERE run_id = ? AND stage = 'sop' "
                               "ORDER BY version", [run_id]).fetchall()
        open_requests = con.execute("SELECT count(*) FROM review_requests WHERE status = 'open'").fetchone()[0]
    assert statuses == [(1, "rejected"), (2, "approved")] and open_requests == 0
    not_paused = cli("review", "approve", run_id)
    assert not_paused.code == 2 and "is not waiting for review (status succeeded)" in not_paused.stderr


def test_an_edit_becomes_a_new_approved_version_with_its_diff(cli, tmp_path):
    with FakeLLMServer(by_stage()) as server:
        proc = cli.start(*generate_args(server, "--review", "ui", *ONLY_SOP_GATE), env=FAST_POLL)
        run_id = wait_for_gate(cli, "sop", 1, proc)
        raw = cli("review", "show", run_id, "--raw")
        edited = raw.stdout.replace("2. Scope", "2. Scope\nReviewed by the pharmacy lead.", 1)
        assert edited != raw.stdout
        (tmp_path / "sop.md").write_text(edited)
        done = cli("review", "edit", run_id, "--file", str(tmp_path / "sop.md"), "--reviewer", "lee",
                   "--comment", "note the sign-off")
        assert done.code == 0, done.stderr
        assert "stored your edit as sop v2" in done.stdout
        summary = finish(proc, timeout=600)
    # The edited SOP differs from the recording, so the scripted graph (same answer) still fits.
    assert summary["status"] == "succeeded"
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        v1, v2 = con.execute("SELECT id, status, content->>'$.text' FROM artifacts WHERE run_id = ? AND stage = 'sop' "
                             "ORDER BY version", [run_id]).fetchall()
        review = con.execute("SELECT decision, reviewer, comment, edit_diff, result_artifact_id, artifact_id "
                             "FROM reviews WHERE run_id = ?", [run_id]).fetchall()
        graph_parent = con.execute("""SELECT e.parent FROM artifact_edges e JOIN artifacts c ON c.id = e.child
                                      WHERE c.run_id = ? AND c.stage = 'api_graph' AND e.parent IN (?, ?)""",
                                   [run_id, v1[0], v2[0]]).fetchall()
    assert v1[1] == "superseded" and v2[1] == "approved" and "Reviewed by the pharmacy lead." in v2[2]
    assert len(review) == 1
    decision, reviewer, comment, diff, result_id, judged = review[0]
    assert (decision, reviewer, comment, result_id, judged) == ("edit", "lee", "note the sign-off", v2[0], v1[0])
    assert "+Reviewed by the pharmacy lead." in diff
    assert graph_parent == [(v2[0],)], "downstream stages are built from the edited version"


def test_auto_gate_stops_on_a_failing_check_and_an_approval_lets_rerun_continue(cli):
    sop = recorded_answer("sop")
    named, unnamed = "`drug_name` identifies the drug and strength", "The drug name identifies the drug and strength"
    assert named in sop
    # The Input section no longer names drug_name: a warning check fails, so the auto gate stops.
    recorded = by_stage({"sop": sop.replace(named, unnamed, 1)})

    def respond(body: dict, protocol: str) -> str:
        # Recorded SOP variants quote the SOP they edit; keep them quoting the SOP of this run.
        return recorded(body, protocol).replace(named, unnamed)

    with FakeLLMServer(respond) as server:
        first = cli(*generate_args(server), env=FAST_POLL)
        assert first.code == 4, first.stderr
        assert first.stderr.startswith("error: sop v1 has 1 failing check(s): sop.inputs_listed (warning)")
        summary = json.loads(first.stdout)
        assert summary["status"] == "needs_review" and [s["stage"] for s in summary["stages"]] == [
            "context", "schema", "sop"]
        run_id = summary["run_id"]
        assert reviews(cli, run_id)[-1][:3] == ("sop", 1, "needs_review")

        listed = json.loads(cli("review", "list", "--json").stdout)
        assert [(r["run"], r["status"], r["stage"]) for r in listed] == [(run_id, "needs_review", "sop")]
        approved = cli("review", "approve", run_id, "--reviewer", "dana")
        assert approved.code == 0 and f"sopforge rerun {run_id}" in approved.stdout

        sent = len(server.requests)
        again = cli("rerun", run_id, "--json", env=FAST_POLL)
        assert again.code == 0, again.stderr
        rerun = json.loads(again.stdout)
        stages = {s["stage"]: s["status"] for s in rerun["stages"]}
    assert stages["context"] == stages["schema"] == stages["sop"] == "reused"
    assert rerun["status"] == "succeeded"
    # Only the stages after the gate asked the model: api_graph, 2 dataset batches, 3 tools asks, reference,
    # distractors and manipulations.
    assert len(server.requests) - sent == RECORDED_CALLS - 3 == rerun["llm_calls"]


def test_a_pause_that_times_out_loses_nothing_and_rerun_picks_it_up(cli):
    with FakeLLMServer(by_stage()) as server:
        paused = cli(*generate_args(server, "--review", "ui", *ONLY_SOP_GATE),
                     env={**FAST_POLL, "SOPFORGE_REVIEW_TIMEOUT_SECONDS": "2"})
        assert paused.code == 4 and "nobody reviewed sop v1 within 2 s" in paused.stderr
        run_id = json.loads(paused.stdout)["run_id"]
        assert reviews(cli, run_id)[-1][2] == "timeout"
        sent = len(server.requests)
        resumed = cli("rerun", run_id, "--review", "auto", "--json", env=FAST_POLL)
        assert resumed.code == 0, resumed.stderr
        summary = json.loads(resumed.stdout)
    assert {s["stage"]: s["status"] for s in summary["stages"]}["sop"] == "reused"
    assert summary["status"] == "succeeded"
    assert len(server.requests) - sent == summary["llm_calls"] == RECORDED_CALLS - 3
