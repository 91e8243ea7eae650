"""Point Prefect at the right server before it is imported by a flow run.

Runs show up in the Prefect UI either way: when a ``sopforge ui`` server is up its API is used
(no 10 s ephemeral start-up), otherwise an ephemeral server runs on the same database under
``<SOPFORGE_HOME>/prefect`` so ``sopforge ui`` shows those runs afterwards.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from sopforge.settings import Settings

UI_STATE_FILE = "ui-server.json"

# Prefect and Great Expectations both phone home unless told not to; these machines have no
# internet, and researchers' machines should not leak usage either.
_QUIET_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "GX_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # The first ephemeral start creates its database and migrates it: 20 s is too short here.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # Flow and task logs (tracebacks included) still go to the API and show in the UI; the
    # terminal shows sopforge's own progress and one clear error line instead.
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_TASK_RUNS_LEVEL": "CRITICAL",
}


def ui_state_path(settings: Settings) -> Path:
    return settings.prefect_home / UI_STATE_FILE


def running_ui_api_url(settings: Settings, timeout: float = 1.0) -> str | None:
    """API URL of a healthy ``sopforge ui`` server for this home, or None."""
    path = ui_state_path(settings)
    try:
        api_url = json.loads(path.read_text())["api_url"]
    except (OSError, ValueError, KeyError):
        return None
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as resp:  # noqa: S310 - loopback URL we wrote
            return api_url if resp.status == 200 else None
    except OSError:
        return None


def configure_prefect(settings: Settings) -> str:
    """Set Prefect's environment for this process; returns a short description of the target.

    Explicit user settings (``PREFECT_API_URL``, ``PREFECT_HOME``) are left alone.
    """
    for key, value in _QUIET_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if os.environ.get("PREFECT_API_URL"):
        return f"Prefect server at {os.environ['PREFECT_API_URL']}"
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))
    api_url = running_ui_api_url(settings)
    if api_url:
        os.environ["PREFECT_API_URL"] = api_url
        return f"Prefect server at {api_url}"
    os.environ.setdefault("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "true")
    return f"ephemeral Prefect server (database in {os.environ['PREFECT_HOME']}; `sopforge ui` shows its runs)"
