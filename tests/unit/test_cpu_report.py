"""``PYTEST_CPU_REPORT`` (tests/cpu_report.py) counts a test's subprocesses, finished or still running, and only once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# Burns 0.6 s of CPU (not of wall time, so a slow or busy machine changes nothing); with --serve, once
# per line read, as long as its stdin is open.
BURN = """
import sys, time

def burn():
    start = time.process_time()
    while time.process_time() - start < 0.6:
        pass

if sys.argv[1:] == ["--serve"]:
    for line in sys.stdin:
        burn()
        print("done", flush=True)
else:
    burn()
"""

SUITE = """
import subprocess, sys
import pytest


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, "burn.py", "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    yield proc
    proc.stdin.close()
    proc.wait()


def test_a_server_answers(server):
    server.stdin.write("go\\n")
    server.stdin.flush()
    assert server.stdout.readline() == "done\\n"


def test_a_child_runs_to_the_end():
    subprocess.run([sys.executable, "burn.py"], check=True)


def test_nothing_but_the_server_stopping():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one process", "xdist"])
def test_each_test_is_charged_its_subprocesses_cpu_once(tmp_path, workers):
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "burn.py").write_text(BURN)
    report = tmp_path / "cpu.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]), "PYTEST_CPU_REPORT": str(report)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "cpu_report", "-q", *workers,
                          "test_suite.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["test"].split("::")[1]: row for row in map(json.loads, report.read_text().splitlines())}
    assert set(rows) == {"test_a_server_answers", "test_a_child_runs_to_the_end",
                         "test_nothing_but_the_server_stopping"}

    served = rows["test_a_server_answers"]  # the server was started in this test and is still running
    assert served["running"] >= 0.5 and served["running_by_command"].get("python burn.py", 0) >= 0.5, served
    child = rows["test_a_child_runs_to_the_end"]
    assert child["finished"] >= 0.5 and child["running"] < 0.3, child
    # The server is reaped here with its 0.6 s, all spent before this test began.
    stopping = rows["test_nothing_but_the_server_stopping"]
    assert stopping["own"] + stopping["finished"] + stopping["running"] < 0.3, stopping

    summary = run.stdout[run.stdout.index("CPU per test, subprocesses included"):].splitlines()
    costliest = summary[2].rsplit("::", 1)[1]  # after the totals and the column names
    assert costliest in {"test_a_server_answers", "test_a_child_runs_to_the_end"}, summary
