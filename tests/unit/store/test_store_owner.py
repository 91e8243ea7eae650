"""A run whose process is gone reads as ``interrupted``; a run whose process lives stays ``running``.

Owners are real processes: a child that creates a run and is then SIGKILLed, this test process,
and rows edited to look like another host's run or a reused pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import duckdb
import pytest

from sopforge.store.owner import STALE_AFTER, Heartbeat

CREATE_AND_HANG = textwrap.dedent("""
    import sys, time
    from sopforge.store import Store
    store = Store(sys.argv[1], lock_timeout=20)
    run_id = store.create_run("pharmacy refills", "pharmacy", {"provider": "scripted"})
    store.start_stage(run_id, "sop")
    print(run_id, flush=True)
    time.sleep(600)
""")


def _killed_owner(db_path, *, reap: bool = True) -> tuple[str, subprocess.Popen]:
    """A run created by a child process that is then killed with SIGKILL mid-stage."""
    child = subprocess.Popen([sys.executable, "-c", CREATE_AND_HANG, str(db_path)], stdout=subprocess.PIPE, text=True)
    run_id = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    if reap:
        child.wait()
    return run_id, child


def _sql(db_path, query: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db_path)) as con:
        return con.execute(query, params or []).fetchall()


def test_a_run_whose_process_was_killed_reads_as_interrupted_and_is_marked_so(store, db_path):
    run_id, _ = _killed_owner(db_path)
    assert _sql(db_path, "SELECT status FROM runs") == [("running",)]  # nothing recorded the end

    run = store.get_run(run_id)
    assert run.status == "interrupted"
    assert "its process (pid" in run.error and f"sopforge rerun {run_id}" in run.error
    assert [r.status for r in store.list_runs()] == ["interrupted"]
    assert [s.status for s in store.run_summary(run_id).stages] == ["interrupted"]

    assert store.mark_interrupted() == [run_id]
    assert _sql(db_path, "SELECT status FROM runs") == [("interrupted",)]
    assert _sql(db_path, "SELECT status, finished_at IS NOT NULL FROM stage_runs") == [("interrupted", True)]
    assert store.mark_interrupted() == []


def test_a_killed_process_not_yet_collected_by_its_parent_is_gone(store, db_path):
    run_id, child = _killed_owner(db_path, reap=False)  # a zombie: still in /proc until waited for
    try:
        assert store.get_run(run_id).status == "interrupted"
    finally:
        child.wait()


def test_a_run_owned_by_a_live_process_stays_running(store, run_id):
    assert store.get_run(run_id).status == "running"  # this test process owns it
    assert store.mark_interrupted() == []


def test_a_reused_pid_is_not_mistaken_for_the_owner(store, db_path, run_id):
    _sql(db_path, "UPDATE runs SET owner_started = '1' WHERE id = ?", [run_id])  # same pid, another start
    assert store.get_run(run_id).status == "interrupted"


def test_another_hosts_run_is_judged_by_its_heartbeat(store, db_path, run_id):
    _sql(db_path, "UPDATE runs SET owner_host = 'worker-7', owner_pid = 1 WHERE id = ?", [run_id])
    assert store.get_run(run_id).status == "running"  # heartbeat written at creation
    stale = STALE_AFTER + timedelta(seconds=5)
    _sql(db_path, "UPDATE runs SET heartbeat_at = heartbeat_at - ? WHERE id = ?", [stale, run_id])
    assert store.get_run(run_id).status == "interrupted"


def test_a_paused_run_whose_process_is_gone_is_interrupted_and_its_gate_expires(store, db_path, save):
    run_id, _ = _killed_owner(db_path)
    artifact = save(run_id, "sop")
    store.open_review_request(run_id, "sop", artifact.id, flow_run_id=None, pause_key="k")
    assert store.get_run(run_id).status == "interrupted"
    store.mark_interrupted()
    assert [r.status for r in store.review_requests(run_id)] == ["expired"]


def test_runs_from_before_owners_were_recorded_keep_their_status(store, db_path, run_id):
    _sql(db_path, "UPDATE runs SET owner_host = NULL, owner_pid = NULL, owner_started = NULL WHERE id = ?", [run_id])
    assert store.get_run(run_id).status == "running"


def test_claim_and_heartbeat_make_this_process_the_owner(store, db_path, run_id):
    _sql(db_path, "UPDATE runs SET owner_pid = 1, heartbeat_at = heartbeat_at - INTERVAL 1 HOUR WHERE id = ?",
         [run_id])
    store.claim_run(run_id, flow_run_id="f-1")
    run = store.get_run(run_id)
    assert (run.status, run.owner_pid, run.flow_run_id) == ("running", os.getpid(), "f-1")
    before = run.heartbeat_at
    with Heartbeat(lambda: store.heartbeat(run_id), interval=0.05):
        time.sleep(0.5)
    assert store.get_run(run_id).heartbeat_at > before


@pytest.mark.parametrize("status", ["succeeded", "failed", "needs_review"])
def test_finished_runs_are_never_interrupted(store, db_path, status):
    run_id, _ = _killed_owner(db_path)
    store.set_run_status(run_id, status)
    assert store.get_run(run_id).status == status
