"""Evaluation throughput: tasks per minute against the fake server, beside the bound the gateway's concurrency sets.

Generates the demo domain (sop_tools, replay: no model latency) in a new home, then starts the
package's fake two-protocol server answering as a perfect agent (tests/integration/eval_agents.py)
after a fixed latency L, and runs ``sopforge eval`` on it through the OpenAI SDK as a user would,
with ``SOPFORGE_MAX_CONCURRENCY`` = C. It prints:

- W: the wall time of the ``sopforge eval`` command, and the wall time of the flow's items alone
  (first item start to last item end, from the store);
- the model tasks evaluated (items that call the model) and their model turns, read from the store;
- the bound B: no schedule can finish faster than max(the longest item's turns x L, all turns x L / C)
  (C calls in flight at most, each taking L);
- tasks per minute measured (over W and over the items' span) and at the bound, and their ratio.

No assertions: run it and read the figures.

    .venv/bin/python benchmarks/eval_throughput.py [--latency 2] [--limit 10] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # the scripted agents

from eval_agents import Truth, responder  # noqa: E402

from sopforge.llm.testserver import FakeLLMServer  # noqa: E402

SOPFORGE = [sys.executable, "-m", "sopforge.cli.app"]


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOPFORGE_", "PREFECT_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", SOPFORGE_HOME=str(home), **extra)
    return env


def sopforge(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run([*SOPFORGE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"sopforge {' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the fake server takes per answer")
    parser.add_argument("--limit", type=int, default=10, help="tasks per suite (sopforge eval --limit)")
    parser.add_argument("--concurrency", type=int, default=16, help="SOPFORGE_MAX_CONCURRENCY")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sopforge-evalbench-") as tmp:
        home = Path(tmp) / "home"
        _, made = sopforge(["generate", "examples/themes/pharmacy_refills.yaml", "--family", "sop_tools", "--json"],
                           environment(home))
        run_id = json.loads(made.stdout)["run_id"]
        db = home / "sopforge.duckdb"
        with duckdb.connect(str(db), read_only=True) as con:
            (graph,) = con.execute("SELECT content FROM artifacts WHERE run_id = ? AND stage = 'api_graph' "
                                   "ORDER BY version DESC LIMIT 1", [run_id]).fetchone()
        truth = Truth(home / "exports" / run_id, json.loads(graph))
        with FakeLLMServer(responder(truth), latency=args.latency) as server:
            wall, done = sopforge(["eval", run_id, "--provider", "openai", "--base-url", server.openai_base_url,
                                   "--model", "perfect", "--limit", str(args.limit), "--json"],
                                  environment(home, OPENAI_API_KEY="sk-bench",
                                              SOPFORGE_MAX_CONCURRENCY=str(args.concurrency)))
            most_in_flight = server.max_in_flight
        summary = json.loads(done.stdout)
        with duckdb.connect(str(db), read_only=True) as con:
            turns = [n for (n,) in con.execute("SELECT llm_calls FROM eval_items WHERE eval_id = ? AND llm_calls > 0",
                                                [summary["eval_id"]]).fetchall()]
            first, last = con.execute("SELECT min(created_at), max(created_at) FROM llm_calls WHERE stage LIKE "
                                      "'eval_%' AND run_id = ?", [run_id]).fetchone()
    tasks, calls = len(turns), sum(turns)
    bound = max(max(turns) * args.latency, calls * args.latency / args.concurrency)
    span = (last - first).total_seconds() + args.latency  # first call's start to last call's end
    print(f"latency L = {args.latency:g} s, concurrency C = {args.concurrency}, --limit {args.limit}")
    print(f"model tasks: {tasks} ({summary['items']} items with the baselines), model turns: {calls} "
          f"(longest task {max(turns)} turns); most requests in flight: {most_in_flight}")
    print(f"bound B = max({max(turns)} x L, {calls} x L / C) = {bound:.1f} s -> {tasks / bound * 60:.1f} tasks/min")
    print(f"W (the whole command) = {wall:.1f} s -> {tasks / wall * 60:.1f} tasks/min, W/B = {wall / bound:.2f}")
    print(f"model-call span = {span:.1f} s -> {tasks / span * 60:.1f} tasks/min, span/B = {span / bound:.2f}")


if __name__ == "__main__":
    main()
