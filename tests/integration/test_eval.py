"""``sopforge eval`` and ``sopforge mcp`` on the demo domain, end to end.

The session's demo (``integration/conftest.py``) is copied once for the module (evaluations write to its
store); its sop_tools family is evaluated. Agents run through the real OpenAI SDK
against the fake server, scripted as a perfect, a lazy and an over-eager agent (eval_agents.py):
their scores must order as expected on every metric, with the baselines beside them, and the
perfect one must match the oracle. The MCP server is driven by the official SDK's own client,
over stdio and streamable HTTP, and must reach each task's expected final state, one task per path.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import anyio
import duckdb
import httpx
import pytest
from mcp import Client, StdioServerParameters

from cli_support import ROOT, SOPFORGE, quiet_env, stop_home_server
from eval_agents import Truth, responder
from sopforge.llm.testserver import FakeLLMServer

pytestmark = [pytest.mark.prefect, pytest.mark.timeout(1800), pytest.mark.xdist_group("demo")]  # where the demo is


class Demo:
    def __init__(self, home: Path, api: str):
        self.home, self.api = home, api

    def env(self, **extra: str) -> dict[str, str]:
        """The session's Prefect server; ``PREFECT_API_URL=""`` leaves the home to start its own, as a user's would."""
        env = quiet_env(**{"SOPFORGE_HOME": str(self.home), "PREFECT_API_URL": self.api, **extra})
        return {k: v for k, v in env.items() if v != "" or k != "PREFECT_API_URL"}

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([*SOPFORGE, *args], cwd=ROOT, env=self.env(**extra), capture_output=True, text=True,
                              timeout=900)


@pytest.fixture(scope="module")
def demo(demo, tmp_path_factory):  # the session's demo, copied
    shared = demo
    demo = Demo(shared.copy(tmp_path_factory.mktemp("eval") / "home"), shared.prefect_api)
    demo.run_id = shared.run_id
    demo.export = demo.home / "exports" / demo.run_id
    with duckdb.connect(str(demo.home / "sopforge.duckdb"), read_only=True) as con:
        (graph,) = con.execute("SELECT content FROM artifacts WHERE run_id = ? AND stage = 'api_graph' "
                               "ORDER BY version DESC LIMIT 1", [demo.run_id]).fetchone()
    demo.truth = Truth(demo.export, json.loads(graph))
    yield demo
    stop_home_server(demo.home)  # one evaluation ran as a user's does, on the home's own server


def evaluate(demo: Demo, server: FakeLLMServer, model: str, *extra: str, **env: str) -> dict:
    result = demo.run("eval", demo.run_id, "--family", "sop_tools", "--provider", "openai", "--base-url",
                      server.openai_base_url, "--model", model, "--judge-model", "perfect", "--limit", "3", "--json",
                      *extra, OPENAI_API_KEY="sk-test", **env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def row(summary: dict, key: str, agent: str) -> dict:
    return next(f for f in summary["families"]["sop_tools"]["facts"][key] if f["agent"] == agent)


def test_perfect_lazy_and_over_eager_agents_order_on_every_metric(demo):
    with FakeLLMServer(responder(demo.truth)) as server:
        perfect, lazy = (evaluate(demo, server, m) for m in ("perfect", "lazy"))
        # The over-eager agent's extra write needs a turn beyond a 9-call path's 10 (the default limit).
        eager = evaluate(demo, server, "eager", "--max-steps", "15")
        react = evaluate(demo, server, "perfect", "--agent", "react")

    p, lz, e = (row(s, "sop_bench", "fc") for s in (perfect, lazy, eager))
    oracle = json.loads((demo.export / "metadata.json").read_text())["oracle"]
    assert (p["strict_tsr"], p["final_state"], p["order"]) == (oracle["strict_tsr"], oracle["final_state"],
                                                               oracle["order"]) == (1.0, 1.0, 1.0)
    assert p["ecr"] == p["tsr"] == p["success"] == p["tool_call_accuracy"] == 1.0 and p["errors"] == 0
    assert p["forbidden_write_tasks"] == 0 and p["mean_unnecessary_calls"] == 0
    assert e["strict_tsr"] == 1.0 and e["final_state"] < p["final_state"] and e["success"] < p["success"]
    assert e["forbidden_write_tasks"] > 0 and e["mean_unnecessary_calls"] > p["mean_unnecessary_calls"]
    assert lz["strict_tsr"] < p["strict_tsr"] and lz["final_state"] == 0.0 and lz["success"] == 0.0
    assert row(lazy, "sop_bench.teller_exec", "fc")["blank"] == 1.0
    teller_p, teller_e = row(perfect, "sop_bench.teller_exec", "fc"), row(eager, "sop_bench.teller_exec", "fc")
    assert teller_p["api_f1"] == 1.0 > teller_e["api_f1"]
    # the baselines are scored beside the agent by the same code, and every one stays below perfect
    baselines = {f["agent"]: f for f in perfect["families"]["sop_tools"]["facts"]["sop_bench"]}
    assert {"no_tools", "empty", "majority_label", "label_soup", "call_every_tool", "read_only"} <= set(baselines)
    assert all(b["success"] < 1.0 for name, b in baselines.items() if name != "fc")
    assert baselines["label_soup"]["tsr"] == 1.0 and baselines["label_soup"]["strict_tsr"] == 0.0, \
        "label soup passes the paper's lenient matcher and fails the strict one"

    graph = {s_name: row(s, "teller_graph", "fc") for s_name, s in (("p", perfect), ("l", lazy), ("e", eager))}
    assert graph["p"]["node_f1"] == graph["p"]["edge_f1"] == 1.0
    assert graph["l"]["node_f1"] == graph["l"]["edge_f1"] == 0.0
    assert graph["e"]["node_r"] == 1.0 and graph["e"]["node_p"] < 1.0
    for key, metric in (("tod_task1", "overall"), ("tod_task2", "accuracy"), ("tod_task3", "compliance_rate")):
        assert row(perfect, key, "fc")[metric] == 1.0 > row(lazy, key, "fc")[metric], key
    assert row(lazy, "tod_task2", "fc")["accuracy"] == 0.5, "always 'compliant' on the balanced set"

    r = row(react, "sop_bench", "react")
    assert r["strict_tsr"] == r["final_state"] == r["success"] == 1.0, "the ReAct agent through the same server"
    results = Path(perfect["results_file"])
    assert results.parent == demo.export / "evaluations" and json.loads(results.read_text())["eval_id"] == perfect["eval_id"]


def test_a_second_run_resumes_and_pays_for_nothing_and_report_reads_the_store(demo):
    # Without PREFECT_API_URL, as a user runs it: the first command starts the home's Prefect server
    # (and waits for it), the second finds it running; the UI of that server shows both.
    own_server = {"PREFECT_API_URL": "", "SOPFORGE_PREFECT_IDLE_SECONDS": "60"}
    with FakeLLMServer(responder(demo.truth)) as server:
        first = evaluate(demo, server, "perfect", **own_server)
        calls = len(server.requests)
        again = evaluate(demo, server, "perfect", **own_server)
        assert len(server.requests) == calls, "a finished evaluation is not run again"
    assert again["eval_id"] != first["eval_id"] or again["ran_now"] == 0
    api = json.loads((demo.home / "prefect" / "server.json").read_text())["api_url"]
    names = [first["eval_id"], again["eval_id"]]
    flow_runs = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": names}}}, timeout=30).json()
    assert {f["name"] for f in flow_runs if f["state_type"] == "COMPLETED"} == set(names), flow_runs
    report = demo.run("eval", "report", first["eval_id"], "--json")
    assert report.returncode == 0 and json.loads(report.stdout)["families"] == first["families"]
    text = demo.run("eval", "report", first["eval_id"])
    assert "ECR" in text.stdout and "label_soup" in text.stdout and "TELLER" in text.stdout


def test_bad_input_is_a_per_item_error_not_a_crash(demo):
    with FakeLLMServer(lambda body, proto: "no tags at all, no tool call") as server:
        summary = evaluate(demo, server, "mumbler")
    fc = row(summary, "sop_bench", "fc")
    assert fc["errors"] == fc["n"] and fc["ecr"] == 0.0
    assert any("unparseable answer" in e["error"] for e in summary["errors"])
    assert row(summary, "sop_bench", "read_only")["ecr"] == 1.0, "the baselines still ran"
    unknown = demo.run("eval", demo.run_id, "--provider", "nope")
    assert unknown.returncode != 0 and "unknown provider 'nope'" in unknown.stderr and "Traceback" not in unknown.stderr


async def follow_each_path(client: Client, truth: Truth) -> dict[str, bool]:
    """One task per distinct expected path: its expected calls, then the session's state."""
    reached = {}
    paths = {}
    for task in truth.tasks:
        paths.setdefault(tuple(task["expected_path"]), task)
    for path, task in paths.items():
        await client.call_tool("sopforge_reset", {})
        for call in task["expected_calls"]:
            result = await client.call_tool(call["tool"], call["input"])
            assert not result.is_error, result.content[0].text
        state = json.loads((await client.read_resource("sopforge://session/state")).contents[0].text)
        reached[" > ".join(path)] = state["state_diff"] == task["expected_state"]
    return reached


def test_an_mcp_client_reaches_each_path_s_expected_state_over_stdio_and_http(demo):
    params = StdioServerParameters(command=SOPFORGE[0], args=[*SOPFORGE[1:], "mcp", demo.run_id, "--control"],
                                   env=demo.env(), cwd=str(ROOT))

    async def over_stdio():
        async with Client(params) as client:
            instructions = client.session.server_info if hasattr(client, "session") else None
            bad = await client.call_tool(demo.truth.tasks[0]["expected_calls"][0]["tool"], {"request_id": 42})
            return await follow_each_path(client, demo.truth), bad, instructions

    reached, bad, _ = anyio.run(over_stdio)
    assert reached and all(reached.values()), reached
    assert bad.is_error and "schema" in bad.content[0].text

    proc = subprocess.Popen([*SOPFORGE, "mcp", demo.run_id, "--transport", "http", "--port", "0", "--control"],
                            cwd=ROOT, env=demo.env(), stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "/mcp" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", line).group(0)

        async def over_http():
            async with Client(url, mode="legacy") as client:
                return await follow_each_path(client, demo.truth)

        assert all(anyio.run(over_http).values())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
