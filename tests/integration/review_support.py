"""Helpers for the review-gate tests: start a generation that pauses, wait for its gate, read decisions."""

from __future__ import annotations

import json
import subprocess
import time

import duckdb

from answers import THEME
from sopforge.llm.testserver import FakeLLMServer

FEEDBACK = "Name the 48-hour prescriber follow-up explicitly in step 5.4"
ONLY_SOP_GATE = ("--gate", "sop", "--no-gate", "api_graph", "--no-gate", "tools", "--no-gate", "package")
FAST_POLL = {"SOPFORGE_REVIEW_POLL_SECONDS": "1", "OPENAI_API_KEY": "sk-test"}


def generate_args(server: FakeLLMServer, *extra: str) -> tuple[str, ...]:
    return ("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools", "--provider", "openai",
            "--model", "m", "--base-url", server.openai_base_url, "--json", *extra)


def wait_for_gate(cli, stage: str, version: int, proc: subprocess.Popen, timeout: float = 240) -> str:
    """Poll `sopforge review list` until a run waits at ``stage`` v``version``; return its id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"generation ended before the gate: {proc.stderr.read()}")
        listed = cli("review", "list", "--json")
        if listed.code == 0:
            rows = [r for r in json.loads(listed.stdout) if r["status"] == "awaiting_review"]
            if rows and rows[0]["stage"] == stage and rows[0]["version"] == version:
                return rows[0]["run"]
        time.sleep(1)
    raise AssertionError(f"no run paused at {stage} v{version} within {timeout}s")


def finish(proc: subprocess.Popen, timeout: float = 300) -> dict:
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr
    return json.loads(stdout)


def reviews(cli, run_id: str) -> list[tuple]:
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        return con.execute("SELECT stage, artifact_version, decision, reviewer, source, comment FROM reviews "
                           "WHERE run_id = ? ORDER BY created_at", [run_id]).fetchall()
