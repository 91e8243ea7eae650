"""``sopforge rerun``: regenerate one stage with feedback, reuse everything else, refuse bad requests."""

from __future__ import annotations

import json

import duckdb
import pytest

from answers import THEME, by_stage, prompt_text
from sopforge.llm.testserver import FakeLLMServer
from sopforge.store import Store

pytestmark = pytest.mark.prefect
FEEDBACK = "State the 48-hour prescriber follow-up explicitly in 5.2"


def test_rerun_from_a_stage_with_feedback_pays_only_for_that_stage(cli):
    common = ("--provider", "openai", "--model", "m", "--json")
    env = {"OPENAI_API_KEY": "sk-test"}
    with FakeLLMServer(by_stage()) as server:
        first = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools",
                    "--base-url", server.openai_base_url, *common, env=env)
        assert first.code == 0, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        sent_before = len(server.requests)
        again = cli("rerun", run_id, "--from", "sop", "--feedback", FEEDBACK, "--json", env=env)
        new_requests = server.requests[sent_before:]
    assert again.code == 0, again.stderr
    summary = json.loads(again.stdout)
    statuses = {s["stage"]: s["status"] for s in summary["stages"]}
    assert statuses["context"] == statuses["schema"] == "reused"
    assert statuses["sop"] == "generated"
    # The scripted model answers with the same SOP, so nothing downstream changes and all of it is reused;
    # the package is written again, under this run's own export folder.
    downstream = ("api_graph", "dataset", "tools", "reference", "distractors", "manipulations")
    assert {statuses[s] for s in downstream} == {"reused"} and statuses["package"] == "generated"
    assert summary["llm_calls"] == 1 and len(new_requests) == 1
    assert FEEDBACK in prompt_text(new_requests[0].json, "openai")
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        config = json.loads(con.execute("SELECT config FROM runs WHERE id = ?", [summary["run_id"]]).fetchone()[0])
    assert config["rerun"] == {"from_run": run_id, "force": ["sop"], "feedback": {"sop": FEEDBACK}}


def test_rerun_refuses_unknown_runs_and_stages_and_runs_still_running(cli):
    no_store = cli("rerun", "r-0000000000")
    assert no_store.code == 2 and "no sopforge database" in no_store.stderr

    store = Store(cli.home / "sopforge.duckdb")
    run_id = store.create_run("t", "t", {"spec": {"theme": "t", "slug": "t", "provider": "replay"}})
    store.set_run_status(run_id, "running")
    unknown_run = cli("rerun", "r-0000000000")
    assert unknown_run.code == 2 and unknown_run.stderr.startswith("error: no run matches")
    unknown_stage = cli("rerun", run_id, "--from", "deploy")
    assert unknown_stage.code == 2 and "unknown stage 'deploy'" in unknown_stage.stderr
    running = cli("rerun", run_id)
    assert running.code == 2 and "still running" in running.stderr and "--force" in running.stderr
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)  # nothing was started
