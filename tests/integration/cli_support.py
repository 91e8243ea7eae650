"""Helpers shared by the end-to-end tests (a module name no other test folder uses)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOPFORGE = [sys.executable, "-m", "sopforge.cli.app"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
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
