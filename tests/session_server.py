"""One Prefect server for the whole test session, shared by every pytest-xdist worker.

The first worker that asks for it starts it, under a file lock in the session's base folder (an xdist
worker's base folder is the controller's plus ``/gwN``, so they all see the same one); the others read
its address from there. The process that runs the session (the xdist controller, or pytest itself
without ``-n``) stops it when the session ends (``tests/conftest.py``). One server instead of one per
worker: a start cost 18 CPU-s and an idle server 2 CPU-s a minute here (2026-11-27), three times over.

The server is started detached (its parent is not a worker), so ``PYTEST_CPU_REPORT`` charges none of
its CPU to whichever tests ran on the worker that happened to start it; the session's stop adds its
whole CPU to the report as one line of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REPORT_LINE = "(session) the shared Prefect server, whole session"


def shared_folder(basetemp: Path) -> Path:
    """The folder every process of this session finds the server's address in."""
    return (basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp) / "prefect-server"


def lease(folder: Path, start: Callable[[list[str], Path], str]) -> str:
    """The server's API URL, starting it first if no process of this session has.

    ``start(detach, pid_file)`` runs the server's command after the ``detach`` prefix (a shell that starts
    it in the background and writes its pid to ``pid_file``) and returns its API URL once it is healthy.
    """
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "server.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if record.exists():
            return json.loads(record.read_text())["api"]
        pid_file = folder / "pid"
        # sh starts the server in the background and exits, so the server's parent is not this worker.
        detach = ["/bin/sh", "-c", f'"$@" > "{folder}/server.log" 2>&1 & echo $! > "{pid_file}"', "sh"]
        try:
            api = start(detach, pid_file)
        except BaseException:
            stop_pid(_read_pid(pid_file))
            raise
        record.write_text(json.dumps({"api": api, "pid": _read_pid(pid_file)}))
        return api


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def stop(folder: Path, cpu_report: Path | None) -> None:
    """Stop the session's server if one was started, adding its CPU to ``cpu_report`` if given."""
    record = folder / "server.json"
    if not record.exists():
        return
    pid = json.loads(record.read_text())["pid"]
    record.unlink()
    cpu = cpu_seconds(pid)
    stop_pid(pid)
    if cpu_report is not None and cpu is not None:
        with open(cpu_report, "a") as f:
            f.write(json.dumps({"test": REPORT_LINE, "wall": 0.0, "own": 0.0, "finished": 0.0, "running": cpu,
                                "running_by_command": {"python -m sopforge.orchestration.prefect_cli": cpu}}) + "\n")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a running process (its reaped children included), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return round(sum(int(f) for f in fields[11:15]) / CLOCK_TICKS, 2)


def stop_pid(pid: int | None, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; a process that is gone or a zombie counts as stopped."""
    if pid is None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.2)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # our own child (pytest without -n started it through sh: not ours)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
