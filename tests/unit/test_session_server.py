"""The session's shared Prefect server (``tests/session_server.py``), with ``sleep`` standing in for it."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

import session_server


def fake_start(calls: list[int]):
    def start(detach: list[str], pid_file: Path) -> str:
        calls.append(1)
        subprocess.run([*detach, "sleep", "300"], check=True, timeout=30)
        return f"http://127.0.0.1:1/api/{pid_file.read_text().strip()}"
    return start


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_workers_share_one_detached_server_and_the_session_stops_it_and_reports_its_cpu(tmp_path):
    folder, calls, apis = tmp_path / "prefect-server", [], []
    leases = [threading.Thread(target=lambda: apis.append(session_server.lease(folder, fake_start(calls))))
              for _ in range(4)]
    for t in leases:
        t.start()
    for t in leases:
        t.join()
    assert len(calls) == 1 and len(set(apis)) == 1
    pid = json.loads((folder / "server.json").read_text())["pid"]
    assert apis[0].endswith(f"/{pid}") and session_server.alive(pid)
    assert parent_of(pid) != os.getpid()  # detached: no worker's test is charged its CPU

    report = tmp_path / "cpu.jsonl"
    session_server.stop(folder, report)
    assert not session_server.alive(pid) and not (folder / "server.json").exists()
    line = json.loads(report.read_text())
    assert line["test"] == session_server.REPORT_LINE and line["running"] >= 0
    session_server.stop(folder, report)  # nothing left to stop
    assert len(report.read_text().splitlines()) == 1


def test_a_server_that_never_gets_healthy_is_stopped_and_not_recorded(tmp_path):
    folder = tmp_path / "prefect-server"

    def unhealthy(detach: list[str], pid_file: Path) -> str:
        fake_start([])(detach, pid_file)
        raise RuntimeError("not healthy")

    with pytest.raises(RuntimeError, match="not healthy"):
        session_server.lease(folder, unhealthy)
    pid = int((folder / "pid").read_text())
    assert not session_server.alive(pid) and not (folder / "server.json").exists()
