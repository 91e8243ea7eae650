"""``sopforge serve``: run generations from a Prefect work pool on an existing Prefect server.

``generate`` runs a flow in the terminal; ``serve`` turns this machine (or container) into a
worker instead: it creates the process work pool if it is missing, registers the deployments in
``prefect.yaml`` and runs a process worker in the foreground. Flow runs started from the UI's
"Run" button or ``prefect deployment run 'new-domain/default' …`` then execute here, each in its
own process, all writing to this worker's ``SOPFORGE_HOME``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Optional

import typer
import yaml

from sopforge.cli.output import err, handle_errors, out
from sopforge.errors import UserError
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sopforge.settings import Settings

DEFAULT_POOL = "sopforge"
POOL_TYPE = "process"
DEPLOYMENTS_FILE = "prefect.yaml"
_NO_SERVER = ("sopforge serve needs a running Prefect server: start `sopforge ui` in another terminal, "
              "or set PREFECT_API_URL (and PREFECT_API_AUTH_STRING if the server is protected)")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


# configure_prefect quiets Prefect's console for `generate`; a worker's console is its only log
# (runs picked up, their task states, tracebacks), so it gets INFO unless the user chose a level.
_WORKER_LOG_LEVELS = ("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL",
                      "PREFECT_LOGGING_HANDLERS_CONSOLE_TASK_RUNS_LEVEL")


def require_server(settings: Settings) -> str:
    """Point Prefect at a real server and return its API URL; never an ephemeral one.

    Raises:
        UserError: neither PREFECT_API_URL nor a ``sopforge ui`` server for this home is set up.
    """
    from sopforge.orchestration.prefect_env import configure_prefect

    chosen = {key for key in _WORKER_LOG_LEVELS if key in os.environ}
    configure_prefect(settings)
    for key in _WORKER_LOG_LEVELS:
        if key not in chosen:
            os.environ[key] = "INFO"
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        # configure_prefect allowed an ephemeral server for this process; a worker on an
        # ephemeral server would serve a pool nobody else can reach.
        os.environ.pop("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", None)
        raise UserError(_NO_SERVER)
    return api_url.rstrip("/")


def wait_for_server(api_url: str, timeout: float) -> None:
    """Wait until ``<api>/health`` answers (it needs no credentials), so a worker started next to
    its server (docker compose, a service manager) does not fail on the first try."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as resp:  # noqa: S310 - the configured API
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise UserError(f"no Prefect server answers at {api_url} (waited {timeout:.0f}s): start it, "
                            "or fix PREFECT_API_URL")
        time.sleep(1.0)


def ensure_work_pool(pool: str, api_url: str) -> bool:
    """Create the process work pool ``pool`` unless it exists; returns True when it was created.

    Raises:
        UserError: the server refuses our credentials, or ``pool`` exists with another type.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound, PrefectHTTPStatusError
    from prefect.workers.process import ProcessWorker

    try:
        with get_client(sync_client=True) as client:
            try:
                existing = client.read_work_pool(pool)
            except ObjectNotFound:
                existing = None
            if existing is not None:
                if existing.type != POOL_TYPE:
                    raise UserError(f"work pool {pool!r} on {api_url} has type {existing.type!r}, not {POOL_TYPE!r}: "
                                    f"pass --pool with another name")
                return False
            try:
                client.create_work_pool(WorkPoolCreate(
                    name=pool, type=POOL_TYPE, description="sopforge generations (sopforge serve)",
                    base_job_template=ProcessWorker.get_default_base_job_template()))
            except ObjectAlreadyExists:  # another `sopforge serve` created it a moment ago
                return False
            return True
    except PrefectHTTPStatusError as error:
        if error.response.status_code in (401, 403):
            raise UserError(f"the Prefect server at {api_url} refused our credentials: set PREFECT_API_AUTH_STRING "
                            "to the server's PREFECT_SERVER_API_AUTH_STRING") from None
        raise


def deployments_for_pool(prefect_file: Path, pool: str) -> str:
    """``prefect.yaml`` with every deployment on ``pool`` (``prefect deploy --all`` ignores ``--pool``)."""
    try:
        config = yaml.safe_load(prefect_file.read_text(encoding="utf-8"))
        deployments = config["deployments"]
        for deployment in deployments:
            deployment.setdefault("work_pool", {})["name"] = pool
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise UserError(f"{prefect_file} is not a readable Prefect deployments file ({error.__class__.__name__}): "
                        "restore it from the checkout") from None
    return yaml.safe_dump(config, sort_keys=False)


def register_deployments(settings: Settings, pool: str) -> None:
    """``prefect deploy --all`` from the checkout, so the deployments match this code.

    Raises:
        UserError: ``prefect.yaml`` is missing or Prefect refused it (its last output line is quoted).
    """
    from sopforge.orchestration.prefect_server import PREFECT_COMMAND

    prefect_file = settings.project_root / DEPLOYMENTS_FILE
    if not prefect_file.is_file():
        raise UserError(f"{prefect_file} is missing: run sopforge serve from a complete checkout "
                        "(or set SOPFORGE_PROJECT_ROOT)")
    with tempfile.TemporaryDirectory(prefix="sopforge-deploy-") as tmp:
        pool_file = Path(tmp) / DEPLOYMENTS_FILE
        pool_file.write_text(deployments_for_pool(prefect_file, pool), encoding="utf-8")
        # Entrypoints (flows/…) are relative to the working directory: the checkout.
        cmd = [*PREFECT_COMMAND, "--no-prompt", "deploy", "--all", "--prefect-file", str(pool_file)]
        proc = subprocess.run(cmd, cwd=settings.project_root, env=dict(os.environ, PREFECT_CLI_PROMPT="false"),
                              capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        raise UserError(f"registering the deployments in {prefect_file} failed: {lines[-1] if lines else proc.returncode}")


def worker_command(pool: str, name: Optional[str], limit: Optional[int]) -> list[str]:
    from sopforge.orchestration.prefect_server import PREFECT_COMMAND

    cmd = [*PREFECT_COMMAND, "worker", "start", "--pool", pool, "--type", POOL_TYPE]
    if name:
        cmd += ["--name", name]
    if limit:
        cmd += ["--limit", str(limit)]
    return cmd


def worker_env(settings: Settings) -> dict[str, str]:
    """The worker's environment, inherited by every flow run it starts.

    Absolute paths: a flow run's working directory is the checkout (the pull step in
    prefect.yaml), so a relative home would land somewhere else.
    """
    return dict(os.environ, SOPFORGE_HOME=str(settings.home.resolve()),
                SOPFORGE_PROJECT_ROOT=str(settings.project_root.resolve()))


@handle_errors
def serve(
    pool: str = typer.Option(DEFAULT_POOL, help="Process work pool to serve (created if missing)."),
    home: Optional[Path] = typer.Option(None, help="State folder the flow runs write to (default $SOPFORGE_HOME or ./artifacts)."),
    deploy: bool = typer.Option(True, "--deploy/--no-deploy", help="Register the deployments in prefect.yaml first."),
    name: Optional[str] = typer.Option(None, help="Worker name shown in the Prefect UI (default: Prefect's)."),
    limit: Optional[int] = typer.Option(None, min=1, help="Flow runs this worker executes at once (default: no limit)."),
    wait: float = typer.Option(60.0, min=0, help="Seconds to wait for the Prefect server to answer."),
) -> None:
    """Run generations started from the Prefect UI or `prefect deployment run` on this machine."""
    from sopforge.settings import load_settings

    settings = load_settings(home=home)
    api_url = require_server(settings)
    wait_for_server(api_url, wait)
    if ensure_work_pool(pool, api_url):
        out.print(f"created work pool {pool!r} ({POOL_TYPE})")
    if deploy:
        register_deployments(settings, pool)
        out.print(f"registered the deployments in {settings.project_root / DEPLOYMENTS_FILE} on pool {pool!r}")
    env = worker_env(settings)
    # SIGTERM (docker stop, a service manager, `kill`) stops the worker like Ctrl-C does. SIGINT
    # gets Python's handler back even when we were started with it ignored (a background job of
    # a non-interactive shell): the worker inherits SIG_IGN otherwise, and Prefect's handler
    # re-raises SIGINT through the ignored disposition and the worker never stops.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Its own session: a terminal's Ctrl-C reaches only us, and we forward exactly one SIGINT
    # (Prefect's worker treats a second SIGINT as "kill now").
    proc = subprocess.Popen(worker_command(pool, name, limit), env=env, start_new_session=True)
    out.print(f"worker on pool {pool!r} at {api_url}; runs write to {env['SOPFORGE_HOME']}. Ctrl-C stops it.")
    out.print("start a domain: prefect deployment run new-domain/default --param theme_file=examples/themes/pharmacy_refills.yaml")
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        code = _stop_worker(proc)
    if code:
        raise typer.Exit(code)


def _children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (Linux /proc; empty elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid …": comm may contain spaces, so split after its ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _interrupt_flow_runs(worker_pid: int, timeout: float = 30.0) -> int:
    """SIGTERM each flow-run process of the worker and wait for it to exit.

    Prefect's worker, when stopped, kills its flow runs without letting them record anything:
    the sopforge run stays "running" and the Prefect flow run "Running". A SIGTERM first lets each
    run stop the way Prefect cancels it: the flow run ends Crashed and the sopforge run failed,
    so ``sopforge rerun RUN`` resumes it at the interrupted stage.
    """
    runs = _children(worker_pid)
    for pid in runs:
        try:
            os.killpg(pid, signal.SIGTERM)  # each flow run leads its own process group
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while runs and time.monotonic() < deadline:
        runs = [pid for pid in runs if Path(f"/proc/{pid}").exists() and _is_running(pid)]
        time.sleep(0.2)
    return len(runs)


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; the worker reaps it


def _stop_worker(proc: subprocess.Popen) -> int:
    """First signal: interrupt the running flow runs (recorded as failed, resumable), then stop
    the worker the way Ctrl-C does. A second signal kills it at once."""
    try:
        runs = _children(proc.pid)
        if runs:
            err.print(f"stopping {len(runs)} running flow run(s); resume each with `sopforge rerun RUN` "
                      "(Ctrl-C again to stop at once)…")
            _interrupt_flow_runs(proc.pid)
        err.print("stopping the worker…")
        proc.send_signal(signal.SIGINT)
        proc.wait()
    except KeyboardInterrupt:
        err.print("killing the worker; a run it was executing shows as interrupted: resume it with "
                  "`sopforge rerun RUN`")
        proc.kill()
        proc.wait()
    return 0
