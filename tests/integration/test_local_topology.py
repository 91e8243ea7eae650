"""docker-compose.yml's topology as local processes, end to end.

PostgreSQL (Debian's binaries, a throwaway cluster), a Prefect server on it with its API behind
``PREFECT_SERVER_API_AUTH_STRING``, and two ``sopforge serve`` processes on the ``sopforge``
pool (the first registers prefect.yaml's deployments), each a process worker taking one flow
run at a time, both writing to the same SOPFORGE_HOME. Domains are started the way a user
starts them on a shared engine: ``prefect deployment run new-domain/default --param …``.
Offline: the themes use the replay provider and the recorded example answers.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
import httpx
import pytest

from cli_support import ROOT, SOPFORGE, free_port, quiet_env, wait_healthy
from sopforge.families import plan
from sopforge.orchestration.prefect_server import PREFECT_COMMAND

pytestmark = [pytest.mark.prefect, pytest.mark.xdist_group("topology")]  # one worker builds the topology


def _pg_bin() -> Path:
    """Newest Debian PostgreSQL server binaries (bookworm ships 15, trixie 17)."""
    versions = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb") if p.parts[-3].isdigit()]
    return max(versions, key=lambda bin_dir: int(bin_dir.parent.name), default=Path("/usr/lib/postgresql/15/bin"))


PG_BIN = _pg_bin()
THEME = "examples/themes/pharmacy_refills.yaml"
RECORDINGS = ROOT / "examples" / "recordings" / "pharmacy_refills"
# The example theme names no families, so a deployment run builds every implemented one.
STAGES = set(plan(("sop_tools", "maze")).names)  # the demo theme's families
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
AUTH = f"sopforge:{secrets.token_hex(12)}"
RUN_TIMEOUT = 240


# --- PostgreSQL ------------------------------------------------------------------------------

def _as_postgres_user() -> list[str]:
    """Command prefix that drops root (initdb and postgres refuse to run as root)."""
    if os.geteuid() != 0:
        return []
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    pytest.skip("running as root without setpriv or runuser to start PostgreSQL as 'postgres'")


@pytest.fixture(scope="module")
def postgres_url():
    """``postgresql+asyncpg://`` URL of a throwaway cluster on a free loopback port."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "postgres").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)")
    as_pg = _as_postgres_user()
    # Not under pytest's tmp dirs: those are root-only (0700), and the cluster belongs to 'postgres'.
    base = Path(tempfile.mkdtemp(prefix="sopforge-pg-"))
    password = secrets.token_hex(12)
    (base / "pw").write_text(password)
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (base, base / "pw"):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = free_port()
    proc = log = None
    try:
        subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(base / "data"), "-U", "prefect", "-E", "UTF8",
                        f"--pwfile={base / 'pw'}", "--auth=scram-sha-256", "--no-instructions"],
                       check=True, capture_output=True, timeout=120)
        log = open(base / "postgres.log", "w")
        proc = subprocess.Popen([*as_pg, str(PG_BIN / "postgres"), "-D", str(base / "data"), "-p", str(port),
                                 "-k", str(base), "-c", "listen_addresses=127.0.0.1"],
                                stdout=log, stderr=subprocess.STDOUT)
        env = dict(os.environ, PGPASSWORD=password)
        deadline = time.monotonic() + 60
        while subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]).returncode != 0:
            assert proc.poll() is None, (base / "postgres.log").read_text()
            assert time.monotonic() < deadline, "PostgreSQL did not accept connections within 60 s"
            time.sleep(0.2)
        subprocess.run([str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "prefect", "prefect"], env=env,
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql+asyncpg://prefect:{password}@127.0.0.1:{port}/prefect"
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # PostgreSQL's "fast" shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log is not None:
            log.close()
        shutil.rmtree(base, ignore_errors=True)


# --- Prefect server and workers --------------------------------------------------------------

@dataclass
class Topology:
    api: str
    home: Path
    client_env: dict[str, str]
    logs: list[Path] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def http(self, auth: bool = True) -> httpx.Client:
        user, password = AUTH.split(":", 1)
        return httpx.Client(base_url=self.api, auth=(user, password) if auth else None, timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
                         for p in self.logs if p.exists())


def _stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_line(path: Path, needle: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[:4]} exited with {proc.returncode}:\n{path.read_text(errors='replace')}")
        time.sleep(0.3)
    raise AssertionError(f"{needle!r} not in {path} after {timeout}s:\n{path.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def topology(postgres_url, tmp_path_factory):
    base = tmp_path_factory.mktemp("topology")
    files = []

    def log_file(path: Path):
        files.append(open(path, "w"))
        return files[-1]

    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    server_log = base / "server.log"
    server_env = quiet_env(PREFECT_HOME=str(base / "prefect-server"), PREFECT_API_DATABASE_CONNECTION_URL=postgres_url,
                           PREFECT_SERVER_API_AUTH_STRING=AUTH, PREFECT_SERVER_API_HOST="127.0.0.1",
                           PREFECT_SERVER_API_PORT=str(port), PREFECT_UI_API_URL=api)
    started = time.monotonic()
    server = subprocess.Popen([*PREFECT_COMMAND, "server", "start", "--host", "127.0.0.1",
                               "--port", str(port)], env=server_env, stdout=log_file(server_log),
                              stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen] = []
    home = base / "home"
    topo = Topology(api=api, home=home, client_env=quiet_env(
        PREFECT_HOME=str(base / "prefect-client"), PREFECT_API_URL=api, PREFECT_API_AUTH_STRING=AUTH), logs=[server_log])
    try:
        wait_healthy(f"{api}/health", server)  # /health needs no credentials (the compose healthcheck relies on it)
        topo.timings["server_start_s"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        # The worker's environment is what a flow run inherits: the store, the Prefect API and its credentials.
        worker_env = quiet_env(SOPFORGE_HOME=str(home), PREFECT_HOME=str(base / "prefect-worker"),
                               PREFECT_API_URL=api, PREFECT_API_AUTH_STRING=AUTH,
                               PREFECT_WORKER_QUERY_SECONDS="2")  # poll every 2 s, not 10: shorter test
        for index, extra in enumerate([[], ["--no-deploy"]]):
            log = base / f"serve-{index}.log"
            topo.logs.append(log)
            workers.append(subprocess.Popen(
                [*SOPFORGE, "serve", "--pool", "sopforge", "--limit", "1", "--name", f"topology-{index}", *extra],
                cwd=ROOT, env=worker_env, stdout=log_file(log), stderr=subprocess.STDOUT))
        for index, proc in enumerate(workers):
            _wait_for_line(base / f"serve-{index}.log", "started!", proc, timeout=180)
        assert "registered the deployments" in (base / "serve-0.log").read_text()
        topo.timings["workers_ready_s"] = round(time.monotonic() - started, 1)
        yield topo
    finally:
        for proc in workers:
            _stop(proc)
        _stop(server, timeout=30)
        for handle in files:
            handle.close()
        print("\n" + topo.log_tail(15))


def start_run(topo: Topology, *params: str) -> str:
    """``prefect deployment run new-domain/default --param …``; returns the flow run id."""
    proc = subprocess.run([*PREFECT_COMMAND, "deployment", "run", "new-domain/default",
                           *[arg for p in params for arg in ("--param", p)]],
                          cwd=ROOT, env=topo.client_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    match = re.search(r"UUID: ([0-9a-f-]{36})", proc.stdout)
    assert match, proc.stdout
    return match.group(1)


def wait_for_run(topo: Topology, flow_run_id: str, timeout: float = RUN_TIMEOUT) -> dict:
    deadline = time.monotonic() + timeout
    with topo.http() as http:
        while True:
            run = http.get(f"/flow_runs/{flow_run_id}").raise_for_status().json()
            if run["state_type"] in TERMINAL:
                return run
            assert time.monotonic() < deadline, f"flow run still {run['state_type']} after {timeout}s\n{topo.log_tail()}"
            time.sleep(1.0)


def seconds(run: dict) -> float:
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("start_time", "end_time"))
    return (end - start).total_seconds()


def store(home: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(home / "sopforge.duckdb"), read_only=True)


# --- tests -----------------------------------------------------------------------------------

SECOND_SLUG = "pharmacy__refills"


def second_theme(folder: Path) -> Path:
    """The pharmacy theme under another slug, with its recordings renamed to the new call keys.

    The slug is part of every call key and of every stage's input key, so to the store this is
    a different domain: nothing is reused across the two runs. The prompts must stay the same
    for the recorded answers (their prompt hashes) to apply, and the tools prompt names the
    manager class after the slug's words, so the slug keeps the words and changes a separator
    (both give ``PharmacyRefillsManager``).
    """
    recordings = folder / "recordings"
    recordings.mkdir(parents=True)
    for path in RECORDINGS.iterdir():
        target = recordings / path.name.replace("pharmacy_refills__", f"{SECOND_SLUG}__", 1)
        target.write_text(path.read_text(encoding="utf-8").replace("call_key: pharmacy_refills/",
                                                                   f"call_key: {SECOND_SLUG}/"), encoding="utf-8")
    text = (ROOT / THEME).read_text(encoding="utf-8")
    text = re.sub(r"(?m)^slug: pharmacy_refills$", f"slug: {SECOND_SLUG}", text)
    text = re.sub(r"(?m)^recordings: .*$", f"recordings: {recordings}", text)
    assert f"slug: {SECOND_SLUG}\n" in text and f"recordings: {recordings}\n" in text
    theme = folder / f"{SECOND_SLUG}.yaml"
    theme.write_text(text, encoding="utf-8")
    return theme


def test_deployment_runs_on_the_authenticated_postgres_server_two_at_once_on_two_workers_share_one_home(
        topology, tmp_path, record_property):
    with topology.http(auth=False) as anonymous:
        assert anonymous.get("/health").status_code == 200
        refused = anonymous.get("/work_pools/sopforge")
        assert refused.status_code == 401, refused.text
        assert anonymous.post("/flow_runs/filter", json={}).status_code == 401
    with topology.http() as http:
        assert http.get("/work_pools/sopforge").raise_for_status().json()["type"] == "process"
        for name in ("new-domain/default", "generate-domain/default"):
            deployment = http.get(f"/deployments/name/{name}").raise_for_status().json()
            assert deployment["work_pool_name"] == "sopforge"

    # One run takes the workers' SOPFORGE_HOME; the other names the same folder through a link in its
    # `home` parameter, so the run's own parameters show which of the two it used.
    home = topology.home
    home.mkdir(parents=True, exist_ok=True)  # the link is followed at once, maybe before the other run makes it
    link = tmp_path / "shared-home"
    link.symlink_to(home, target_is_directory=True)
    themes = {"pharmacy_refills": THEME, SECOND_SLUG: str(second_theme(tmp_path / "theme-b"))}
    params = {"pharmacy_refills": [], SECOND_SLUG: [f"home={link}"]}

    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        ids = dict(zip(themes, pool.map(lambda slug: start_run(topology, f"theme_file={themes[slug]}", "review=auto",
                                                               *params[slug]), themes)))
        runs = dict(zip(ids, pool.map(lambda i: wait_for_run(topology, i), ids.values())))
    pair_wall = time.monotonic() - started
    assert {slug: r["state_type"] for slug, r in runs.items()} == dict.fromkeys(themes, "COMPLETED"), topology.log_tail()

    # Both ran at the same time (each worker takes one run at a time, so on different workers).
    a, b = runs.values()
    assert a["start_time"] < b["end_time"] and b["start_time"] < a["end_time"], (a["start_time"], b["start_time"])

    with store(home) as con:
        rows = dict(con.execute("SELECT theme_slug, id FROM runs WHERE status = 'succeeded'").fetchall())
        assert set(rows) == set(themes), con.execute("SELECT theme_slug, status, error FROM runs").fetchall()
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2,)
        for slug, run_id in rows.items():
            stages = con.execute("SELECT stage, status FROM stage_runs WHERE run_id = ?", [run_id]).fetchall()
            assert {s for s, _ in stages} == STAGES and {st for _, st in stages} == {"succeeded"}, (slug, stages)
            # Every artifact of the run was generated by it (no cross-run reuse), and its lineage
            # points only at the run's own artifacts.
            artifacts = con.execute("SELECT count(*) FROM artifacts WHERE run_id = ?", [run_id]).fetchone()
            assert artifacts == (len(STAGES),)
            assert con.execute("SELECT count(DISTINCT stage) FROM artifacts WHERE run_id = ?", [run_id]).fetchone() == (
                len(STAGES),)
            foreign = con.execute("""SELECT count(*) FROM artifact_edges e JOIN artifacts c ON c.id = e.child
                                     JOIN artifacts p ON p.id = e.parent
                                     WHERE c.run_id = ? AND p.run_id <> c.run_id""", [run_id]).fetchone()
            assert foreign == (0,)
            assert con.execute("""SELECT count(*) FROM stage_runs s JOIN artifacts a ON a.id = s.artifact_id
                                  WHERE s.run_id = ? AND a.run_id <> s.run_id""", [run_id]).fetchone() == (0,)
            # The LLM calls a run recorded carry its own call keys. (A run may record none: the
            # prompts are identical, so one run can be answered from the other's response cache.)
            keys = con.execute("SELECT DISTINCT split_part(call_key, '/', 1) FROM llm_calls WHERE run_id = ?",
                               [run_id]).fetchall()
            assert set(keys) <= {(slug,)}, (slug, keys)
        assert con.execute("SELECT count(*) FROM llm_calls").fetchone()[0] > 0
    exports = {slug: home / "exports" / run_id / slug for slug, run_id in rows.items()}
    assert len({p.parent for p in exports.values()}) == 2
    for slug, folder in exports.items():
        assert (folder / "sop.txt").is_file() and (folder / "tools.py").is_file()
        assert sorted(p.name for p in folder.parent.iterdir() if p.is_dir()) == sorted([slug, "maze"])
        assert json.loads((folder.parent / "metadata.json").read_text())["run_id"] == rows[slug]
    # Each run's generate-domain subflow is the Prefect flow run named after its run id, and it was
    # given the home its run resolved: the workers' default, or the `home` parameter.
    with topology.http() as http:
        for slug, run_id in rows.items():
            subflows = http.post("/flow_runs/filter",
                                 json={"flow_runs": {"name": {"any_": [run_id]}}}).raise_for_status().json()
            assert [(f["state_type"], f["parameters"]["home"]) for f in subflows] == [
                ("COMPLETED", str(link if params[slug] else home))], slug

    timings = {f"{slug}_flow_s": round(seconds(r), 1) for slug, r in runs.items()}
    timings["pair_wall_s"] = round(pair_wall, 1)
    topology.timings.update(timings)
    for key, value in topology.timings.items():
        record_property(key, value)
    print(f"\ntimings: {topology.timings}")
