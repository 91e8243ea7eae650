"""How close a real run gets to its critical path, and how fast the CLI answers.

Starts the package's fake two-protocol server (``sopforge.llm.testserver``) answering every call
of the example domain (the recorded pharmacy_refills answers) after a fixed latency L, runs
``sopforge generate`` on it through the OpenAI SDK exactly as a user would, and prints:

- W: the wall time of the whole command (what the user waits for);
- C: the critical-path bound. Each stage needs some number of *sequential* model rounds (a
  dataset batch needs the ids of the batch before it; the tools asks are a chain; a re-ask
  follows its refused answer; an SOP variant's judge follows its generator; a compliance pair's
  rewrite follows its dialogue, which follows the instruction document). Those rounds are read
  from the call keys the run recorded; C is the longest path through the plan's declared stage
  dependencies (``sopforge.families.plan``) of rounds x L. No schedule can beat C.
- N x L: what a fully sequential run would spend waiting on the model;
- the most requests the server saw in flight at once, and the prompt-cache hit share;
- per-call overhead: sequential calls through the gateway, the SDK and the store's ledger against
  the fake server at zero latency (everything a call costs besides the model);
- CLI start: ``--help``, ``runs``, ``show``, ``review list`` and ``audit --no-run``;
- a fully cached second ``make demo`` (replay provider, every stage reused).

No assertions: run it and read the figures against the targets (W/C <= 1.5 at 2 s latency,
per-call overhead <= 20 ms, CLI start < 1 s, cached demo <= 10 s).

    .venv/bin/python benchmarks/orchestration.py [--latency 2] [--family sop_tools] [--skip-demo]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # the recorded answers, by prompt

from answers import THEME, by_stage  # noqa: E402

from sopforge.llm.testserver import FakeLLMServer  # noqa: E402

SOPFORGE = [sys.executable, "-m", "sopforge.cli.app"]
DEMO_THEME = ROOT / "examples" / "themes" / "pharmacy_refills.yaml"


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOPFORGE_", "PREFECT_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", SOPFORGE_HOME=str(home), **extra)
    return env


def timed_run(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run([*SOPFORGE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    return time.perf_counter() - started, proc


# --- the critical path ------------------------------------------------------------------------

def _attempt(key: str) -> int:
    match = re.search(r"/a(\d+)$", key)
    return int(match.group(1)) if match else 1


def _item(key: str) -> str:
    return key.split("/")[2] if key.count("/") >= 3 else ""


def stage_rounds(stage: str, keys: list[str]) -> int:
    """Sequential model rounds ``stage`` needs, from the call keys it recorded (see the module doc)."""
    if not keys:
        return 0
    chains: dict[str, int] = {}  # item -> attempts (re-asks of one conversation are sequential)
    for key in keys:
        chains[_item(key)] = max(chains.get(_item(key), 0), _attempt(key))
    if stage in ("dataset", "tools"):  # each batch / step reads the one before it
        return sum(chains.values())
    if stage == "manipulations":
        cycle = lambda item: int(re.search(r"_c(\d+)$", item).group(1)) if re.search(r"_c(\d+)$", item) else 1  # noqa: E731
        variants = max((2 * cycle(i) for i in chains if i.startswith(("variant_", "judge_"))), default=0)
        instructions = chains.get("instructions", 0)
        dialogue = max((n for i, n in chains.items() if i.startswith("dialogue_")), default=0)
        pairs = max((2 * cycle(i) for i in chains if i.startswith(("rewrite_", "entail_"))), default=0)
        return max(variants, instructions + dialogue + pairs)
    return max(chains.values())  # independent items of one stage (the distractor asks)


def critical_path(calls: dict[str, list[str]], families: tuple[str, ...]) -> tuple[int, list[str]]:
    """(rounds on the longest path through the plan's stage DAG, that path)."""
    from sopforge.families import plan

    best: dict[str, tuple[int, list[str]]] = {}
    for spec in plan(families).stages:  # topological order
        before = max((best[p] for p in spec.parents), default=(0, []), key=lambda b: b[0])
        best[spec.name] = (before[0] + stage_rounds(spec.name, calls.get(spec.name, [])), before[1] + [spec.name])
    return max(best.values(), key=lambda b: b[0])


def ledger(home: Path) -> tuple[dict[str, list[str]], int, int]:
    """Call keys per stage, prompt tokens and cached prompt tokens of every call in ``home``."""
    import duckdb

    with duckdb.connect(str(home / "sopforge.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT stage, call_key, input_tokens, cached_tokens FROM llm_calls").fetchall()
    calls: dict[str, list[str]] = {}
    for stage, key, _, _ in rows:
        calls.setdefault(stage, []).append(key)
    return calls, sum(r[2] for r in rows), sum(r[3] for r in rows)


# --- the measurements -------------------------------------------------------------------------

def generation(latency: float, family: str, home: Path, model: str, extra: list[str]) -> dict:
    respond = by_stage()

    def slow(body: dict, protocol: str) -> str:
        time.sleep(latency)
        return respond(body, protocol)

    with FakeLLMServer(slow) as server:
        began = time.time()
        wall, proc = timed_run(["generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", family,
                                "--provider", "openai", "--model", model, "--base-url", server.openai_base_url,
                                "--json", *extra],
                               environment(home, OPENAI_API_KEY="sk-bench", SOPFORGE_REQUESTS_PER_MINUTE="100000"))
        n, in_flight = len(server.requests), server.max_in_flight
    if proc.returncode != 0:
        sys.exit(f"generate failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    calls, tokens_in, tokens_cached = ledger(home)
    model_calls = {s: [k for k in keys] for s, keys in calls.items()}
    rounds, path = critical_path(model_calls, (family,))
    return {"W": wall, "C": rounds * latency, "rounds": rounds, "path": path, "N": n, "NL": n * latency,
            "in_flight": in_flight, "cache_share": tokens_cached / tokens_in if tokens_in else 0.0,
            "timeline": timeline(home, json.loads(proc.stdout)["run_id"], began)}


def timeline(home: Path, run_id: str, began: float) -> list[str]:
    """One line per stage of the run: seconds from the command's start to the stage's start and end, and
    the span between its first model call's start and its last call's end (where the rest went)."""
    import duckdb

    with duckdb.connect(str(home / "sopforge.duckdb"), read_only=True) as con:
        stages = con.execute("SELECT stage, epoch(started_at), epoch(finished_at) FROM stage_runs WHERE run_id = ? "
                             "ORDER BY started_at", [run_id]).fetchall()
        calls = dict((stage, (first, last)) for stage, first, last in con.execute(
            "SELECT stage, min(epoch(created_at) - latency_ms / 1000), max(epoch(created_at)) FROM llm_calls "
            "WHERE run_id = ? GROUP BY stage", [run_id]).fetchall())
    lines = []
    for stage, start, end in stages:
        first, last = calls.get(stage, (None, None))
        span = f"   calls {first - began:6.1f} .. {last - began:6.1f}" if first is not None else ""
        lines.append(f"    {stage:<14} {start - began:6.1f} .. {end - began:6.1f} s{span}")
    return lines


def per_call_overhead(n: int = 50) -> tuple[float, float]:
    """Milliseconds per call beyond the model, sequential calls against the fake server at zero latency:
    (sopforge's own work: gateway, cache lookup, limiter, ledger; the same plus the SDK's HTTP exchange
    with a server on this machine, less the server's own work)."""
    from sopforge.llm.gateway import Gateway
    from sopforge.llm.providers.openai import OpenAIProvider
    from sopforge.llm.types import LLMRequest, Message
    from sopforge.settings import Settings
    from sopforge.store import Store, release_connections

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(lambda body, protocol: "ok") as server:
        settings = Settings(home=Path(tmp), requests_per_minute=1_000_000)
        provider = OpenAIProvider("sk-bench", server.openai_base_url, 30)
        gateway = Gateway(provider, ledger=Store(settings.db_path), settings=settings)
        sending = [0.0]
        send = provider.send

        def timed_send(request):
            started = time.perf_counter()
            try:
                return send(request)
            finally:
                sending[0] += time.perf_counter() - started

        provider.send = timed_send

        def ask(i: int) -> None:
            gateway.complete(LLMRequest(messages=[Message(role="user", content=f"question {i} " + "context " * 500)],
                                        model="m", call_key=f"bench/overhead/{i}/a1", stage="overhead"))

        ask(-1)  # connection set-up and the first store write are paid once per run, not per call
        served, sending[0] = getattr(server, "service_seconds", 0.0), 0.0
        started = time.perf_counter()
        for i in range(n):
            ask(i)
        wall = time.perf_counter() - started
        release_connections()
        server_work = getattr(server, "service_seconds", 0.0) - served
        return (wall - sending[0]) / n * 1000, (wall - server_work) / n * 1000


def cli_start(home: Path, run_id: str, export: str | None) -> dict[str, float]:
    commands = {"--help": ["--help"], "runs": ["runs"], "show": ["show", run_id],
                "show --stage sop": ["show", run_id, "--stage", "sop"], "review list": ["review", "list"]}
    if export:
        commands["audit --no-run"] = ["audit", export, "--no-run"]
    times = {}
    for name, args in commands.items():
        best = min(timed_run(args, environment(home))[0] for _ in range(3))
        times[name] = best
    return times


def cached_demo(home: Path) -> tuple[float, float, dict]:
    first, proc = timed_run(["generate", str(DEMO_THEME), "--json"], environment(home))
    if proc.returncode != 0:
        sys.exit(f"demo failed: {proc.stderr.strip()[-2000:]}")
    second, proc = timed_run(["generate", str(DEMO_THEME), "--json"], environment(home))
    summary = json.loads(proc.stdout)
    return first, second, summary


def stop_home_server(home: Path) -> None:
    """Stop the background Prefect server a home's commands started (sopforge.orchestration.prefect_server)."""
    try:
        pid = json.loads((home / "prefect" / "server.json").read_text())["pid"]
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, KeyError):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=2.0, help="Seconds the fake server takes per call.")
    parser.add_argument("--family", default="sop_tools", help="Family to generate.")
    parser.add_argument("--skip-demo", action="store_true", help="Skip the cached demo and CLI timings.")
    parser.add_argument("--timeline", action="store_true", help="Print when each stage and its calls ran.")
    parser.add_argument("--extra", default="", help="Extra generate options, e.g. '--max-cost 5'.")
    args = parser.parse_args()
    extra = args.extra.split() if args.extra else []

    with tempfile.TemporaryDirectory(prefix="sopforge-bench-") as tmp:
        try:
            run(args, Path(tmp), extra)
        finally:
            for home in ("home", "demo"):
                stop_home_server(Path(tmp) / home)


def run(args: argparse.Namespace, tmp: Path, extra: list[str]) -> None:
    """Both generations, the per-call overhead, the cached demo and the CLI timings, printed."""
    home = tmp / "home"
    cold = generation(args.latency, args.family, home, "bench-model", extra)
    # Same home, another model name: nothing is reused, but Prefect (and the OS caches) are warm.
    warm = generation(args.latency, args.family, home, "bench-model-2", extra)
    print(f"orchestration benchmark: family {args.family}, fake server latency L = {args.latency:g} s")
    print(f"  critical path: {cold['rounds']} rounds x L = C {cold['C']:.1f} s  via {' -> '.join(cold['path'])}")
    print(f"  N = {cold['N']} calls, N x L = {cold['NL']:.1f} s")
    for label, r in (("first run in a new home", cold), ("second run, same home", warm)):
        print(f"  {label:<24} W {r['W']:6.1f} s   W/C {r['W'] / r['C']:.2f} (target <= 1.5)   "
              f"max in flight {r['in_flight']}   cache-hit share {r['cache_share']:.0%}")
        if args.timeline:
            print("\n".join(r["timeline"]))
    own, with_http = per_call_overhead()
    print(f"  per-call overhead {own:.1f} ms in sopforge (target <= 20 ms); {with_http:.1f} ms with the SDK's "
          "HTTP exchange to a local server")
    if args.skip_demo:
        return
    demo_home = tmp / "demo"
    first, second, summary = cached_demo(demo_home)
    print(f"  make demo: first {first:.1f} s, fully cached second {second:.1f} s (target <= 10 s; "
          f"{summary['llm_calls']} LLM calls the second time)")
    for name, seconds in cli_start(demo_home, summary["run_id"], summary.get("export")).items():
        print(f"  CLI start {name:<16} {seconds:.2f} s (target < 1 s)")


if __name__ == "__main__":
    main()
