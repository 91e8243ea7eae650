"""Fixtures for end-to-end tests: a real Prefect server on loopback and a CLI runner.

The CLI is run as a subprocess, the way a user runs it; the Prefect server is started once per
session so each CLI invocation does not pay the ephemeral server's start-up.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from cli_support import ROOT, SOPFORGE, free_port, quiet_env, wait_healthy


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory) -> str:
    """API URL of a Prefect server started for this test session on 127.0.0.1."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = quiet_env(PREFECT_HOME=str(home), PREFECT_UI_API_URL=api, PREFECT_SERVER_API_HOST="127.0.0.1",
                    PREFECT_SERVER_API_PORT=str(port))
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"{api}/health", proc)
        yield api
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(prefect_api, tmp_path):
    """Run ``sopforge …`` in a subprocess with SOPFORGE_HOME in tmp_path, against the session server."""
    home = tmp_path / "home"

    def environment(env: dict[str, str] | None) -> dict[str, str]:
        return quiet_env(SOPFORGE_HOME=str(home), PREFECT_API_URL=prefect_api, **(env or {}))

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
        proc = subprocess.run([*SOPFORGE, *args], cwd=ROOT, env=environment(env), capture_output=True, text=True,
                              timeout=timeout)
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    started: list[subprocess.Popen] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``sopforge …`` in the background (e.g. a generation that pauses at a gate)."""
        proc = subprocess.Popen([*SOPFORGE, *args], cwd=ROOT, env=environment(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    run.home = home
    run.start = start
    yield run
    for proc in started:  # a failed test must not leave a paused generation behind
        if proc.poll() is None:
            proc.kill()
            proc.wait()
