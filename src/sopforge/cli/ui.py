"""``sopforge ui``: start the Prefect server and UI on loopback, on this home's database."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

import typer

from sopforge.cli.output import err, handle_errors, out
from sopforge.errors import UserError


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_healthy(api_url: str, proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=1) as resp:  # noqa: S310 - loopback
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


@handle_errors
def ui(
    port: int = typer.Option(4200, help="Port on 127.0.0.1."),
    home: Optional[Path] = typer.Option(None, help="State folder (default $SOPFORGE_HOME or ./artifacts)."),
    startup_timeout: float = typer.Option(120.0, help="Seconds to wait for the server to become healthy."),
) -> None:
    """Start the Prefect UI on 127.0.0.1; sopforge runs (past and future) appear there."""
    from sopforge.orchestration.prefect_env import configure_prefect, running_ui_api_url, ui_state_path
    from sopforge.settings import load_settings

    from sopforge.orchestration.prefect_server import PREFECT_COMMAND, lease, shared_server_url, stop_process

    settings = load_settings(home=home)
    shared = shared_server_url(settings.prefect_home)
    if shared:  # a generate started this home's server already: show its UI rather than start a second one
        out.print(f"Prefect UI: {shared.removesuffix('/api')}  (this home's server, started by an earlier command; "
                  f"database in {settings.prefect_home}). It stays up while this command runs; Ctrl-C leaves.")
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            with lease(settings.prefect_home):
                while shared_server_url(settings.prefect_home):
                    time.sleep(5)
        except KeyboardInterrupt:
            pass
        return
    if running_ui_api_url(settings):
        raise UserError(f"a sopforge UI is already running for {settings.home}: see {ui_state_path(settings)}")
    # Checked before starting: otherwise the health check could be answered by whatever server
    # already holds the port, and runs would report to the wrong database.
    if not _port_free(port):
        raise UserError(f"port {port} on 127.0.0.1 is already in use: pass --port with a free port (e.g. --port {port + 1})")
    os.environ.pop("PREFECT_API_URL", None)  # the server must not point at itself through a stale URL
    configure_prefect(settings)
    api_url = f"http://127.0.0.1:{port}/api"
    env = dict(os.environ, PREFECT_SERVER_API_HOST="127.0.0.1", PREFECT_SERVER_API_PORT=str(port),
               PREFECT_UI_API_URL=api_url, PREFECT_UI_URL=f"http://127.0.0.1:{port}")
    cmd = [*PREFECT_COMMAND, "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    # A SIGTERM (from a service manager or `kill`) must stop the server too, not orphan it.
    signal.signal(signal.SIGTERM, _interrupt)
    proc = subprocess.Popen(cmd, env=env)
    state = ui_state_path(settings)
    try:
        if not _wait_healthy(api_url, proc, startup_timeout):
            raise UserError(f"the Prefect server did not become healthy on port {port} within {startup_timeout:.0f}s: "
                            "is the port in use? try --port 4201")
        state.write_text(json.dumps({"api_url": api_url, "pid": proc.pid}))
        out.print(f"Prefect UI: http://127.0.0.1:{port}  (API {api_url}, database in {settings.prefect_home})")
        out.print("sopforge generate now reports to this server; Ctrl-C stops it.")
        proc.wait()
    except KeyboardInterrupt:
        err.print("stopping the Prefect server…")
    finally:
        state.unlink(missing_ok=True)
        stop_process(proc)
