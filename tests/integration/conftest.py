"""Fixtures for end-to-end tests: a real Prefect server on loopback, a CLI runner and a shared demo.

The CLI is run as a subprocess, the way a user runs it; the Prefect server is started once per
session and shared by the pytest-xdist workers (``tests/session_server.py``), so each CLI invocation
does not pay a server's start-up.

``demo``: the example domain (``make demo``'s theme, every family) generated once per session and
shared. A test that only reads a generated domain takes ``demo`` and reads ``demo.home`` (its
``sopforge.duckdb``, ``exports/``, ``datasets/``), ``demo.summary`` (the generate command's
``--json`` summary) and ``demo.run_id``; its flow run is on the session's Prefect server
(``prefect_api``). It must not change anything there: a test that writes (a rerun, a delete, a
review) calls ``demo.copy(tmp_path / "home")`` and works on that copy, which has the same runs and
artifacts. Mark the test ``@pytest.mark.xdist_group("demo")`` so that, under ``make test``, it runs
on the worker that already generated the demo instead of generating it again on another.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import session_server
from cli_support import ROOT, SOPFORGE, quiet_env, start_detached_server


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory) -> str:
    """API URL of the Prefect server on 127.0.0.1 that this test session shares (``tests/session_server.py``)."""
    return session_server.lease(session_server.shared_folder(tmp_path_factory.getbasetemp()), start_detached_server)


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def cli_runner(home: Path, prefect_api: str) -> Callable[..., CliResult]:
    """``run(*args, env=None, timeout=300)``: ``sopforge …`` in a subprocess with SOPFORGE_HOME=home.

    ``run.home`` is the home; ``run.start(*args)`` starts a command in the background (kept in
    ``run.started`` so the fixture can stop what a failed test left running).
    """

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
    run.started = started
    return run


@pytest.fixture
def cli(prefect_api, tmp_path):
    """Run ``sopforge …`` in a subprocess with SOPFORGE_HOME in tmp_path, against the session server."""
    run = cli_runner(tmp_path / "home", prefect_api)
    yield run
    for proc in run.started:  # a failed test must not leave a paused generation behind
        if proc.poll() is None:
            proc.kill()
            proc.wait()

DEMO_THEME = "examples/themes/pharmacy_refills.yaml"


@dataclass(frozen=True)
class Demo:
    """The example domain generated once for the session (read-only: see the module docstring)."""

    home: Path
    summary: dict[str, Any]
    stderr: str
    prefect_api: str

    def cli(self, *args: str, timeout: float = 300) -> CliResult:
        """Run a command that only reads (``show``, ``runs``, ``review list``, ``audit``) on the demo's home."""
        return cli_runner(self.home, self.prefect_api)(*args, timeout=timeout)

    @property
    def run_id(self) -> str:
        return self.summary["run_id"]

    def copy(self, target: Path) -> Path:
        """A writable copy of the demo's home at ``target`` (same runs, artifacts, exports)."""
        shutil.copytree(self.home, target, ignore=shutil.ignore_patterns("prefect"))
        return target

    def copy_cli(self, target: Path) -> Callable[..., CliResult]:
        """A CLI runner (as the ``cli`` fixture's) on a writable copy of the demo's home at ``target``."""
        return cli_runner(self.copy(target), self.prefect_api)


@pytest.fixture(scope="session")
def demo(prefect_api, tmp_path_factory) -> Iterator[Demo]:
    """``sopforge generate examples/themes/pharmacy_refills.yaml --json`` once per session, in its own home."""
    home = tmp_path_factory.mktemp("demo") / "home"
    proc = subprocess.run([*SOPFORGE, "generate", DEMO_THEME, "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env=quiet_env(SOPFORGE_HOME=str(home), PREFECT_API_URL=prefect_api))
    assert proc.returncode == 0, proc.stderr
    before = _digest(home)
    yield Demo(home=home, summary=json.loads(proc.stdout), stderr=proc.stderr, prefect_api=prefect_api)
    # Tests share it read-only: one that wrote here would change what the others read.
    assert _digest(home) == before, f"a test changed the shared demo in {home}: work on demo.copy(...) instead"


def _digest(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file() and "prefect" not in p.relative_to(home).parts}
