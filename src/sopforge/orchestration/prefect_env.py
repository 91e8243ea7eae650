"""Point Prefect at the right server before it is imported by a flow run.

In order of preference: ``PREFECT_API_URL`` when the user set one; the server of a running
``sopforge ui`` for this home; this home's shared background server
(:mod:`sopforge.orchestration.prefect_server`: started once by the first command that needs it,
reused by every later or concurrent one); or, for commands that do not start one, Prefect's
ephemeral server. All of them keep their database under ``<SOPFORGE_HOME>/prefect``, so
``sopforge ui`` shows every run of the home.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

from sopforge.errors import SopforgeError
from sopforge.orchestration.prefect_server import (hold_lease, shared_server_url, start_shared_server,
                                                      wait_for_shared_server)
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


def _prefect_defaults(settings: Settings) -> None:
    for key, value in _QUIET_DEFAULTS.items():
        os.environ.setdefault(key, value)
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))


# The home server's URL this process pointed Prefect at before the server answered (begin_prefect);
# ready_prefect checks that the server came up there.
_early_url: str | None = None


def begin_prefect(settings: Settings) -> None:
    """Start this home's shared Prefect server in the background if the command will need one and
    none is running, and point this process's Prefect at it at once; returns without waiting, so
    the server comes up while the command does its own work (importing Prefect included).
    :func:`ready_prefect` waits for it before the flow run starts."""
    global _early_url
    if os.environ.get("PREFECT_API_URL") or running_ui_api_url(settings, timeout=0.3):
        return
    hold_lease(settings.prefect_home)  # before looking: a server about to stop for idleness stays up
    # Only a server this call starts has a known future address; one already running is found (and
    # checked) by configure_prefect, which takes no time when it answers.
    url = start_shared_server(settings.prefect_home)
    if url is not None:
        _prefect_defaults(settings)
        os.environ["PREFECT_API_URL"] = _early_url = url


def starting_prefect() -> bool:
    """Whether :func:`begin_prefect` started this home's server and pointed Prefect at it before it answered:
    until :func:`ready_prefect` returns, seconds in which the command can prepare what its first stage needs."""
    return _early_url is not None and os.environ.get("PREFECT_API_URL") == _early_url


def ready_prefect(settings: Settings) -> None:
    """Wait until the server :func:`begin_prefect` pointed Prefect at answers (no-op otherwise).

    Raises:
        SopforgeError: it did not come up, or came up at another address (a rare port clash:
            Prefect was configured for the first one, so the command must start again).
    """
    if not starting_prefect():
        return
    url = wait_for_shared_server(settings.prefect_home)
    if url != _early_url:
        raise SopforgeError(f"the Prefect server for {settings.prefect_home} came up at {url}, not at {_early_url} "
                            "where this command expected it (its port was taken): run the command again")


def configure_prefect(settings: Settings, *, shared_server: bool = False) -> str:
    """Set Prefect's environment for this process; returns a short description of the target.

    Explicit user settings (``PREFECT_API_URL``, ``PREFECT_HOME``) are left alone.

    Args:
        shared_server: start this home's shared background server when none is running (and wait
            for it); without it, one already running is still used, else Prefect's ephemeral one.
            After :func:`begin_prefect` pointed Prefect at the home's server this does not wait:
            call :func:`ready_prefect` before the flow run.
    """
    target = _set_prefect_environment(settings, shared_server)
    if "prefect.context" in sys.modules:
        # Prefect reads its settings from the environment once, when imported: imported before this
        # call, it would keep the old ones and run the flow on an ephemeral server of its own.
        sys.modules["prefect.context"].refresh_global_settings_context()
    return target


def _set_prefect_environment(settings: Settings, shared_server: bool) -> str:
    if starting_prefect():
        return f"Prefect server at {_early_url.removesuffix('/api')} (this home's, shared by its commands)"
    for key, value in _QUIET_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if os.environ.get("PREFECT_API_URL"):
        return f"Prefect server at {os.environ['PREFECT_API_URL']}"
    _prefect_defaults(settings)
    api_url = running_ui_api_url(settings)
    if api_url:
        os.environ["PREFECT_API_URL"] = api_url
        return f"Prefect server at {api_url}"
    api_url = shared_server_url(settings.prefect_home)
    if api_url is None and shared_server:
        start_shared_server(settings.prefect_home)
        api_url = wait_for_shared_server(settings.prefect_home)
    if api_url is not None:
        os.environ["PREFECT_API_URL"] = api_url
        return f"Prefect server at {api_url.removesuffix('/api')} (this home's, shared by its commands)"
    os.environ.setdefault("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "true")
    return f"ephemeral Prefect server (database in {os.environ['PREFECT_HOME']}; `sopforge ui` shows its runs)"
