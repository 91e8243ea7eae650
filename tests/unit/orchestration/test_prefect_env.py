"""Prefect is pointed at the home's running server even when it was imported before being configured.

Prefect reads its settings from the environment once, when first imported. A command that imported
it before ``configure_prefect`` set ``PREFECT_API_URL`` ran its flow on an ephemeral server of its
own (a second server on the home's database, and seconds of start-up): ``sopforge eval`` did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

PROBE = """
import sys
from pathlib import Path
import prefect.context  # as a command that imports Prefect first
from prefect.settings import PREFECT_API_URL
from sopforge.orchestration.prefect_env import configure_prefect
from sopforge.settings import Settings
configure_prefect(Settings(home=Path(sys.argv[1])), shared_server=True)
print(PREFECT_API_URL.value())
"""


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def running_home_server(tmp_path):
    """A home whose state file names a healthy server (a stand-in answering ``/api/health``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_url = f"http://127.0.0.1:{server.server_port}/api"
    home = tmp_path / "home"
    (home / "prefect").mkdir(parents=True)
    (home / "prefect" / "server.json").write_text(json.dumps({"api_url": api_url, "pid": os.getpid()}))
    yield home, api_url
    server.shutdown()


def test_prefect_imported_first_still_uses_the_home_s_running_server(running_home_server):
    home, api_url = running_home_server
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SOPFORGE_"))}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(home)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == api_url
