"""Helpers shared by the end-to-end tests (a module name no other test folder uses)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import session_server
from sopforge.orchestration.prefect_server import PREFECT_COMMAND, stop_process
from sopforge.orchestration.prefect_template import BLOCKS_REGISTERED, seed_database

ROOT = Path(__file__).resolve().parents[2]
SOPFORGE = [sys.executable, "-m", "sopforge.cli.app"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | int, timeout: float = 180) -> None:
    """Wait until ``url`` answers 200; ``proc`` is the server's process, or its pid if it is not our child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if isinstance(proc, int) and not session_server.alive(proc):
            raise RuntimeError(f"prefect server (pid {proc}) exited")
        if not isinstance(proc, int) and proc.poll() is not None:
            raise RuntimeError(f"prefect server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"prefect server not healthy at {url} after {timeout}s")


def quiet_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOPFORGE_", "PREFECT_")) and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                                                        "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.update(extra)
    return env


def _server(home: Path) -> tuple[list[str], dict[str, str], str]:
    """(command, environment, API URL) of a Prefect server on a free loopback port, its state in ``home``.

    Its database starts from the machine's template when there is one, as a new sopforge home's does
    (``prefect_template``): healthy after 6 s instead of 16 here (2026-11-28).
    """
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = quiet_env(PREFECT_HOME=str(home), PREFECT_UI_API_URL=api, PREFECT_SERVER_API_HOST="127.0.0.1",
                    PREFECT_SERVER_API_PORT=str(port), **(BLOCKS_REGISTERED if seed_database(home) else {}))
    return [*PREFECT_COMMAND, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, api


def start_detached_server(detach: list[str], pid_file: Path) -> str:
    """Start the session's shared server through ``detach`` (``session_server.lease``); its API URL once healthy."""
    home = pid_file.parent / "prefect-home"
    home.mkdir(exist_ok=True)
    command, env, api = _server(home)
    subprocess.run([*detach, *command], env=env, check=True, timeout=30)
    wait_healthy(f"{api}/health", int(pid_file.read_text()))
    return api


@contextmanager
def own_prefect_server(home: Path) -> Iterator[str]:
    """A Prefect server of the caller's own (a child process) while the block runs: its API URL."""
    command, env, api = _server(home)
    with open(home / "server.log", "w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(f"{api}/health", proc)
            yield api
        finally:
            stop_process(proc, grace=30)


def stop_home_server(home: Path) -> None:
    """Stop the background Prefect server a command without PREFECT_API_URL started for ``home``, if any."""
    state = home / "prefect" / "server.json"
    if not state.exists():
        return
    try:
        os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):  # it removes its state file as it stops
        if not state.exists():
            break
        time.sleep(0.2)


FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "CRASHED"}


def recorded_task_runs(api: str, flow_run_id: str, stages: list[str], timeout: float = 60) -> list[dict]:
    """The flow run's task runs, read once the server holds one for each of ``stages`` and every one has
    reached a final state (or ``timeout`` has passed). The server records task runs from their events, in
    batches it flushes every few seconds: a moment after the command has ended, the last stage can still
    read RUNNING though its COMPLETED event is on its way."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        response = httpx.post(f"{api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_run_id]}},
                                                              "limit": 200}, timeout=30)
        response.raise_for_status()
        task_runs = response.json()
        recorded = set(stages) <= {t["name"] for t in task_runs}
        if recorded and {t["state_type"] for t in task_runs} <= FINAL_STATES or time.monotonic() > deadline:
            return task_runs
        time.sleep(1)
