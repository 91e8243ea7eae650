"""Crash, resume and damage trials (issue 21): does a stopped run resume without paying twice, losing
a call from the ledger or a family from its export, and is a damaged store noticed before a run starts?

Every run talks to the package's fake two-protocol server (``sopforge.llm.testserver``) through the
OpenAI SDK, answered with the recorded pharmacy_refills answers after a small latency, all three
families, on one Prefect server started for the trials. Printed, per kind of trial:

- **interrupt trials**: a ``generate`` stopped at a random moment (SIGKILL, SIGINT, SIGTERM in turn),
  then the same command run again. Per trial: the stopped run's status in plain SQL after the next
  command, the resumed run's exit code, requests the server answered twice with the same body (paid
  twice at the provider), provider requests missing from ``llm_calls`` (paid but not in the ledger,
  hence not in ``--max-cost``), answers stored twice for one request hash, and whether the resumed
  run's ``exports/<run id>/`` holds every family's declared exports.
- **concurrent pairs**: two runs of the theme started at once in one home: requests paid twice.
- **damaged stores**: a finished store damaged (64 bytes over a data block of each table that has one
  of its own, cut to a third and to two thirds, garbage over the header); ``generate``, ``rerun``,
  ``runs`` and ``show`` run on a copy each: exit code, one line, seconds, and whether a Prefect server
  was started for it.

No assertions: run it and read the table.

    .venv/bin/python benchmarks/crash_trials.py [--trials 9] [--pairs 2] [--latency 0.05] [--skip-damage]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # the recorded answers, by prompt

from answers import by_stage  # noqa: E402
from cli_support import free_port, wait_healthy  # noqa: E402

from sopforge.llm.testserver import FakeLLMServer  # noqa: E402
from sopforge.orchestration.prefect_server import PREFECT_COMMAND  # noqa: E402

SOPFORGE = [sys.executable, "-m", "sopforge.cli.app"]
FAMILIES = ("sop_tools", "probe", "maze")
SIGNALS = (signal.SIGKILL, signal.SIGINT, signal.SIGTERM)


def environment(home: Path, api: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOPFORGE_", "PREFECT_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_API_URL=api, SOPFORGE_HOME=str(home), OPENAI_API_KEY="sk-trial",
               SOPFORGE_REQUESTS_PER_MINUTE="100000", **extra)
    return env


def generate_args(server: FakeLLMServer) -> list[str]:
    # The demo theme (its PROBE and SOP-Maze sections are the recorded ones), asked through the OpenAI SDK.
    return ["generate", str(ROOT / "examples" / "themes" / "pharmacy_refills.yaml"), "--provider", "openai",
            "--model", "gpt-4o-mini", "--base-url", server.openai_base_url, "--json"]


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    # SIGINT at its default, as in a terminal (a background job would start the child with it ignored).
    return subprocess.Popen([*SOPFORGE, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def paid_twice(server: FakeLLMServer) -> int:
    """Requests the server answered more than once with the very same body."""
    bodies = Counter(json.dumps(r.json, sort_keys=True) for r in server.requests if r.json)
    return sum(n - 1 for n in bodies.values() if n > 1)


def ledger(home: Path) -> tuple[int, int, dict[str, tuple[str, str | None]]]:
    """(llm_calls rows, answers stored twice for one request hash, run id -> (status, error))."""
    import duckdb

    with duckdb.connect(str(home / "sopforge.duckdb"), read_only=True) as con:
        (rows,) = con.execute("SELECT count(*) FROM llm_calls").fetchone()
        twice_by_key = con.execute("SELECT any_value(call_key), count(*) - 1 FROM llm_calls WHERE error IS NULL "
                                   "GROUP BY request_hash HAVING count(*) > 1").fetchall()
        twice = sum(n for _, n in twice_by_key)
        if twice_by_key:
            print(f"  stored twice in {home.name}: {', '.join(k for k, _ in twice_by_key)}", flush=True)
        runs = {r: (s, e) for r, s, e in con.execute("SELECT id, status, error FROM runs").fetchall()}
    return rows, int(twice), runs


def missing_exports(folder: Path) -> list[str]:
    from sopforge.families import load_family

    missing = []
    for name in FAMILIES:
        for spec in load_family(name).exports:
            for part in (p.strip() for p in spec.path.split(",")):
                pattern = part.replace("<slug>", "pharmacy_refills").replace("<sample>", "*").replace("<scenario>", "*")
                if not list(folder.glob(pattern.rstrip("/"))):
                    missing.append(f"{name}:{part}")
    return missing


def baseline(api: str, latency: float, root: Path) -> tuple[float, int, int]:
    home = root / "baseline"
    respond = by_stage()
    with FakeLLMServer(lambda body, proto: (time.sleep(latency), respond(body, proto))[1]) as server:
        started = time.monotonic()
        proc = subprocess.run([*SOPFORGE, *generate_args(server)], cwd=ROOT, env=environment(home, api),
                              capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            sys.exit(f"baseline run failed: {proc.stderr[-2000:]}")
        return wall, len(server.requests), paid_twice(server)


def interrupt_trial(n: int, api: str, latency: float, wall: float, root: Path, rng: random.Random) -> dict:
    home = root / f"trial-{n}"
    stop = SIGNALS[n % len(SIGNALS)]
    respond = by_stage()
    with FakeLLMServer(lambda body, proto: (time.sleep(latency), respond(body, proto))[1]) as server:
        env = environment(home, api)
        proc = start(generate_args(server), env)
        deadline = time.monotonic() + 600
        while not server.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.8) * wall)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=900)
        stopped_code = proc.returncode
        resumed = subprocess.run([*SOPFORGE, *generate_args(server)], cwd=ROOT, env=env, capture_output=True,
                                 text=True, timeout=3600)
        rows, stored_twice, runs = ledger(home)
        summary = json.loads(resumed.stdout) if resumed.returncode == 0 else {}
        killed = [r for r in runs if r != summary.get("run_id")]
        statuses = [runs[r][0] for r in killed]
        last = (err.strip().splitlines() or [""])[-1]
        return {
            "trial": n, "signal": stop.name, "stopped exit": stopped_code,
            "line with rerun": "rerun r-" in last if stop != signal.SIGKILL else None,
            "stopped run": ",".join(statuses) or "(finished)", "resumed exit": resumed.returncode,
            "provider requests": len(server.requests), "paid twice": paid_twice(server),
            "not in ledger": max(0, len(server.requests) - rows), "stored twice": stored_twice,
            "export complete": not missing_exports(home / "exports" / summary["run_id"]) if summary else False,
        }


def concurrent_pair(n: int, api: str, latency: float, root: Path) -> dict:
    home = root / f"pair-{n}"
    respond = by_stage()
    with FakeLLMServer(lambda body, proto: (time.sleep(latency), respond(body, proto))[1]) as server:
        env = environment(home, api)
        first, second = start(generate_args(server), env), start(generate_args(server), env)
        codes = [p.wait(timeout=3600) for p in (first, second)]
        rows, stored_twice, _ = ledger(home)
        return {"pair": n, "exits": codes, "provider requests": len(server.requests),
                "paid twice": paid_twice(server), "not in ledger": max(0, len(server.requests) - rows),
                "stored twice": stored_twice}


def damage_cases(source: Path) -> dict[str, bytes]:
    """Damaged copies of a finished store's bytes, by what was done to them."""
    import duckdb

    data = source.read_bytes()
    with duckdb.connect(str(source), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()]
        used = {t: {b for (b,) in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{t}') "
                                              "WHERE block_id >= 0").fetchall()} for t in tables}
    cases = {}
    for table in tables:
        own = used[table] - set().union(*(b for t, b in used.items() if t != table))
        if own:
            damaged = bytearray(data)
            start = 3 * 4096 + min(own) * 262144 + 16
            damaged[start:start + 64] = b"\xab" * 64
            cases[f"64 bytes over a {table} block"] = bytes(damaged)
    cases["cut to a third"] = data[: len(data) // 3]
    cases["cut to two thirds"] = data[: 2 * len(data) // 3]
    cases["garbage header"] = b"\x00garbage\xff" * 500 + data[5000:]
    return cases


def damage_trials(api: str, source_home: Path, run_id: str, root: Path) -> list[dict]:
    results = []
    theme = str(ROOT / "examples" / "themes" / "pharmacy_refills.yaml")
    for case, data in damage_cases(source_home / "sopforge.duckdb").items():
        for command in (["generate", theme], ["rerun", run_id], ["runs"], ["show", run_id]):
            home = root / "damaged"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            (home / "sopforge.duckdb").write_bytes(data)
            env = environment(home, api)
            env.pop("PREFECT_API_URL")  # a run would start this home's own Prefect server: was one started?
            started = time.monotonic()
            proc = subprocess.run([*SOPFORGE, *command], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=900)
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            results.append({"damage": case, "command": command[0], "exit": proc.returncode,
                            "caught": proc.returncode == 2 and len(lines) == 1 and "damaged" in lines[0],
                            "seconds": round(time.monotonic() - started, 1),
                            "server started": (home / "prefect").exists()})
            _stop_home_server(home)
    return results


def _stop_home_server(home: Path) -> None:
    info = home / "prefect" / "server.json"
    if info.exists():
        try:
            os.kill(json.loads(info.read_text())["pid"], signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass


def table(rows: list[dict]) -> str:
    if not rows:
        return "(none)"
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--skip-damage", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="sopforge-trials-"))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    prefect_home = root / "prefect"
    prefect_home.mkdir()
    server = subprocess.Popen([*PREFECT_COMMAND, "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env={**environment(prefect_home, api), "PREFECT_HOME": str(prefect_home)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(f"{api}/health", server)
        wall, requests, twice = baseline(api, args.latency, root)
        print(f"baseline: an uninterrupted run takes {wall:.1f} s and {requests} provider requests "
              f"({twice} of them the same request twice)")
        trials = [interrupt_trial(n, api, args.latency, wall, root, rng) for n in range(args.trials)]
        print("\ninterrupt trials (stopped at a random moment, then the same command again)")
        print(table(trials))
        print(f"totals: {len(trials)} interrupted runs; paid twice at the provider "
              f"{sum(t['paid twice'] for t in trials)}; paid but not in llm_calls {sum(t['not in ledger'] for t in trials)}; "
              f"stored twice {sum(t['stored twice'] for t in trials)}; exports complete "
              f"{sum(bool(t['export complete']) for t in trials)}/{len(trials)}; resumed with exit 0 "
              f"{sum(t['resumed exit'] == 0 for t in trials)}/{len(trials)}")
        pairs = [concurrent_pair(n, api, args.latency, root) for n in range(args.pairs)]
        print("\nconcurrent pairs (two runs of the theme at once, one home)")
        print(table(pairs))
        if not args.skip_damage:
            damage = damage_trials(api, root / "baseline", _first_run(root / "baseline"), root)
            print("\ndamaged stores (a copy of the baseline's store per command)")
            print(table(damage))
            print(f"caught: {sum(d['caught'] for d in damage)}/{len(damage)}; a Prefect server started for "
                  f"{sum(d['server started'] for d in damage)}")
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _first_run(home: Path) -> str:
    import duckdb

    with duckdb.connect(str(home / "sopforge.duckdb"), read_only=True) as con:
        return con.execute("SELECT id FROM runs ORDER BY created_at LIMIT 1").fetchone()[0]


if __name__ == "__main__":
    main()
