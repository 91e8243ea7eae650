"""A ``sopforge generate`` killed with SIGKILL mid-stage: the run reads as interrupted and resumes.

Nothing in the killed process can record the end, so before issue 15 the run and its stage stayed
``running`` for ever and ``rerun`` refused them without ``--force``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import duckdb
import pytest

from answers import THEME, by_stage, prompt_text, stage_of
from cli_support import ROOT, SOPFORGE, quiet_env
from sopforge.llm.testserver import FakeLLMServer

pytestmark = pytest.mark.prefect


def test_a_killed_generate_is_shown_interrupted_and_rerun_resumes_it_without_force(cli):
    release = threading.Event()
    answer = by_stage()

    def respond(body: dict, protocol: str) -> str:
        if stage_of(prompt_text(body, protocol)) == "sop":
            release.wait(300)  # hold the SOP call: the process is killed while it waits
        return answer(body, protocol)

    common = ("--provider", "openai", "--model", "m", "--json")
    env = {"OPENAI_API_KEY": "sk-test"}
    with FakeLLMServer(respond) as server:
        proc = cli.start("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools", "--base-url",
                         server.openai_base_url, *common, env=env)
        deadline = time.monotonic() + 240
        while not any(r.json and stage_of(prompt_text(r.json, "openai")) == "sop" for r in list(server.requests)):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the SOP stage never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        release.set()

        db = cli.home / "sopforge.duckdb"
        with duckdb.connect(str(db), read_only=True) as con:
            run_id, raw_status = con.execute("SELECT id, status FROM runs").fetchone()
            assert raw_status == "running"  # the killed process recorded nothing
            assert con.execute("SELECT status FROM stage_runs WHERE stage = 'sop'").fetchall() == [("running",)]

        listed = cli("runs", "--json")
        assert listed.code == 0, listed.stderr
        [run] = json.loads(listed.stdout)
        assert run["status"] == "interrupted" and f"sopforge rerun {run_id}" in run["error"]
        with duckdb.connect(str(db), read_only=True) as con:  # the first command wrote it down: plain SQL agrees
            assert con.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
            assert con.execute("SELECT status FROM stage_runs WHERE stage = 'sop'").fetchall() == [("interrupted",)]
        shown = cli("show", run_id, "--json")
        stages = {s["stage"]: s["status"] for s in json.loads(shown.stdout)["stages"]}
        assert stages == {"context": "succeeded", "schema": "succeeded", "sop": "interrupted"}
        table = cli("runs")
        assert "interrupted" in table.stdout

        resumed = cli("rerun", run_id, "--json", env=env)  # no --force
    assert resumed.code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "succeeded"
    statuses = {s["stage"]: s["status"] for s in summary["stages"]}
    assert statuses["context"] == statuses["schema"] == "reused" and statuses["sop"] == "generated"
    with duckdb.connect(str(db), read_only=True) as con:  # the rerun wrote the interruption down
        assert con.execute("SELECT status FROM runs WHERE id = ?", [run_id]).fetchone() == ("interrupted",)
        assert con.execute("SELECT status FROM stage_runs WHERE run_id = ? AND stage = 'sop'",
                           [run_id]).fetchall() == [("interrupted",)]


@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_generate_is_stored_interrupted_and_says_how_to_resume(cli, prefect_api, stop, code):
    # Issue 21: SIGINT stored the run as failed ("KeyboardInterrupt:"), SIGTERM exited 143 with no line.
    release = threading.Event()
    answer = by_stage()

    def respond(body: dict, protocol: str) -> str:
        if stage_of(prompt_text(body, protocol)) == "sop":
            release.wait(300)
        return answer(body, protocol)

    env = {"OPENAI_API_KEY": "sk-test"}
    with FakeLLMServer(respond) as server:
        # Started here rather than with cli.start: SIGINT must reach it even when this test runs in a
        # background job (which starts its children with SIGINT ignored).
        proc = subprocess.Popen(
            [*SOPFORGE, "generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools",
             "--base-url", server.openai_base_url, "--provider", "openai", "--model", "m", "--json"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=quiet_env(SOPFORGE_HOME=str(cli.home), PREFECT_API_URL=prefect_api, **env),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 240
            while not any(r.json and stage_of(prompt_text(r.json, "openai")) == "sop" for r in list(server.requests)):
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the SOP stage never started"
                time.sleep(0.2)
            proc.send_signal(stop)
            time.sleep(1)
            release.set()  # the stage in flight finishes and is kept
            _, stderr = proc.communicate(timeout=240)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == code, stderr
        last = stderr.strip().splitlines()[-1]
        db = cli.home / "sopforge.duckdb"
        with duckdb.connect(str(db), read_only=True) as con:
            run_id, status, error = con.execute("SELECT id, status, error FROM runs").fetchone()
        assert last.startswith("error: ") and f"interrupted by {stop.name}" in last and f"rerun {run_id}`" in last, stderr
        assert status == "interrupted" and f"sopforge rerun {run_id}" in error

        resumed = cli("rerun", run_id, "--json", env=env)  # no --force
    assert resumed.code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "succeeded"
