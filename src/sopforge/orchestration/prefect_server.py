"""One Prefect server per SOPFORGE_HOME, started once in the background and shared.

Every ``sopforge generate`` used to start Prefect's ephemeral server (10–25 s on a 2-core machine)
and stop it at exit; two generates on one home each started one on the same SQLite database, and
one of them could fail with ObjectNotFound (issue 15). Instead, the first command that needs
Prefect starts this module as a detached process (``python -m sopforge.orchestration.prefect_server
HOME``) which runs ``prefect server start`` on a free loopback port with the home's database and
writes ``<home>/prefect/server.json`` once it is healthy; every later command of that home,
concurrent or not, finds the file and reuses the server. A file lock makes sure only one process
starts it. The command that starts it does not wait idle: it chooses the server's port itself,
spawns the server, points Prefect at that port and does its own imports (Prefect's included) and
checks while the server comes up; it waits only before the flow run starts.

Commands hold a lease (``<home>/prefect/clients/<pid>``) while they use the server; the server
stops itself when no lease has been held for ``SOPFORGE_PREFECT_IDLE_SECONDS`` (30 minutes), so it
never outlives its usefulness for long. ``sopforge ui`` shows this server's UI when it runs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from sopforge.errors import SopforgeError
from sopforge.orchestration.prefect_template import BLOCKS_REGISTERED, save_template, seed_database

__all__ = ["PREFECT_COMMAND", "SERVER_STATE_FILE", "healthy", "hold_lease", "lease", "server_environment",
           "shared_server_url", "start_shared_server", "stop_process", "wait_for_shared_server"]

SERVER_STATE_FILE = "server.json"
# Prefect's own command line with sopforge's collector thresholds (orchestration/prefect_cli.py): how
# sopforge starts every Prefect server, worker and deployment command.
PREFECT_COMMAND = (sys.executable, "-m", "sopforge.orchestration.prefect_cli")
DEFAULT_IDLE_SECONDS = 1800.0


def healthy(api_url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as resp:  # noqa: S310 - a loopback URL we wrote
            return resp.status == 200
    except OSError:
        return False


def _state(prefect_home: Path) -> dict | None:
    try:
        return json.loads((prefect_home / SERVER_STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def shared_server_url(prefect_home: Path) -> str | None:
    """API URL of this home's healthy background server, or None."""
    state = _state(prefect_home)
    if state and isinstance(state.get("api_url"), str) and healthy(state["api_url"], timeout=5.0):
        return state["api_url"]
    return None


def _server_alive(prefect_home: Path) -> bool:
    """Whether the process named in the state file still runs (slow to answer is not dead: on a
    loaded machine a health check can time out, and a second server on one database is the bug
    this module exists to prevent)."""
    state = _state(prefect_home)
    if not state or not isinstance(state.get("pid"), int):
        return False
    try:
        os.kill(state["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked(prefect_home: Path) -> Iterator[None]:
    prefect_home.mkdir(parents=True, exist_ok=True)
    with open(prefect_home / "server.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start_shared_server(prefect_home: Path) -> str | None:
    """Start this home's background server unless one is running or starting; returns at once.

    The lock file is held by the starting server process itself until it is healthy (or gave
    up), so a second command that calls this meanwhile neither starts another one nor misses it.

    Returns:
        The API URL the server will answer on when this call started it (the port is chosen here,
        so the caller can point Prefect at it and import it while the server comes up), else None.
    """
    if _server_alive(prefect_home):
        return None
    prefect_home.mkdir(parents=True, exist_ok=True)
    with open(prefect_home / "server.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another command is starting it right now
        if _server_alive(prefect_home):
            return None  # running (maybe slow to answer): wait for it rather than start a second one
        (prefect_home / SERVER_STATE_FILE).unlink(missing_ok=True)
        port = _free_port()
        # The child inherits the locked descriptor: the lock stays held until it closes it (healthy,
        # or given up), even after this process has closed its own copy.
        with open(prefect_home / "server.log", "ab") as log:
            subprocess.Popen([sys.executable, "-m", "sopforge.orchestration.prefect_server", str(prefect_home),
                              str(port)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                             pass_fds=(handle.fileno(),),
                             env={**os.environ, "SOPFORGE_SERVER_LOCK_FD": str(handle.fileno())})
    return _api_url(port)


def _api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def wait_for_shared_server(prefect_home: Path, timeout: float = 180.0) -> str:
    """Wait until this home's background server is healthy; returns its API URL.

    Raises:
        SopforgeError: it did not come up (its log is ``<home>/prefect/server.log``).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        url = shared_server_url(prefect_home)
        if url:
            return url
        with _locked(prefect_home):  # free again: the starter is healthy or gave up
            url = shared_server_url(prefect_home)
            if url:
                return url
        if not _server_alive(prefect_home) and not _starting(prefect_home):
            start_shared_server(prefect_home)  # the last one gave up or died: try once more
        time.sleep(0.2)
    raise SopforgeError(f"the Prefect server for {prefect_home} did not start within {timeout:.0f}s "
                       f"(see {prefect_home / 'server.log'})")


def _starting(prefect_home: Path) -> bool:
    with open(prefect_home / "server.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def hold_lease(prefect_home: Path) -> None:
    """Keep the background server alive until this process exits (see :func:`lease`): taken as soon
    as a command decides to use the server, so it cannot stop for idleness while the command is
    still starting up (seconds on a loaded machine) and vanish under the flow run."""
    clients = prefect_home / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    mine = clients / str(os.getpid())
    mine.touch()
    atexit.register(mine.unlink, missing_ok=True)


@contextlib.contextmanager
def lease(prefect_home: Path) -> Iterator[None]:
    """Keep the background server alive while the block runs (a file named after this process)."""
    clients = prefect_home / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    mine = clients / str(os.getpid())
    mine.touch()
    try:
        yield
    finally:
        mine.unlink(missing_ok=True)


def _live_clients(prefect_home: Path) -> int:
    live = 0
    for entry in (prefect_home / "clients").glob("*"):
        try:
            os.kill(int(entry.name), 0)
            live += 1
        except (ValueError, ProcessLookupError):
            entry.unlink(missing_ok=True)  # its process died without cleaning up
        except PermissionError:
            live += 1
    return live


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_environment(prefect_home: Path, port: int, *, seeded: bool) -> dict[str, str]:
    """The environment of the home's ``prefect server start``; ``seeded``: its database came from the template."""
    api_url = _api_url(port)
    env = {**(BLOCKS_REGISTERED if seeded else {}),  # a user's own setting wins
           **os.environ, "PREFECT_HOME": str(prefect_home), "PREFECT_SERVER_API_HOST": "127.0.0.1",
           "PREFECT_SERVER_API_PORT": str(port), "PREFECT_UI_API_URL": api_url,
           "PREFECT_UI_URL": f"http://127.0.0.1:{port}", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    return env


def serve(prefect_home: Path, idle_seconds: float, port: int | None = None) -> int:
    """Run the server until it has had no client for ``idle_seconds`` (the detached process's main)."""
    lock_fd = int(os.environ.pop("SOPFORGE_SERVER_LOCK_FD", "-1"))
    port = port or _free_port()
    api_url = _api_url(port)
    seeded = seed_database(prefect_home)
    new_database = not seeded and not (prefect_home / "prefect.db").exists()
    env = server_environment(prefect_home, port, seeded=seeded)
    proc = subprocess.Popen([*PREFECT_COMMAND, "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdin=subprocess.DEVNULL)
    state = prefect_home / SERVER_STATE_FILE

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        deadline = time.monotonic() + 180
        while not healthy(api_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                return 1
            time.sleep(0.2)
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps({"api_url": api_url, "ui_url": f"http://127.0.0.1:{port}", "pid": os.getpid()}))
        tmp.replace(state)
        if lock_fd >= 0:
            os.close(lock_fd)  # healthy: waiting commands may go on
            lock_fd = -1
        if new_database:
            save_template(prefect_home)  # the next new home's server skips the migrations
        last_client = time.monotonic()
        while proc.poll() is None and prefect_home.is_dir():  # a deleted home needs no server
            time.sleep(2)
            if _live_clients(prefect_home):
                last_client = time.monotonic()
            elif time.monotonic() - last_client > idle_seconds:
                break
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if lock_fd >= 0:
            os.close(lock_fd)
        current = _state(prefect_home)
        if current and current.get("pid") == os.getpid():
            state.unlink(missing_ok=True)
        stop_process(proc)


def stop_process(proc: subprocess.Popen, grace: float = 20) -> None:
    """Terminate a server process, and kill it if it has not stopped within ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), float(os.environ.get("SOPFORGE_PREFECT_IDLE_SECONDS", DEFAULT_IDLE_SECONDS)),
                   int(sys.argv[2]) if len(sys.argv) > 2 else None))
