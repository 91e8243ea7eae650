"""End to end: the CLI in a subprocess, a real Prefect server, real DuckDB, real SDKs over HTTP."""

from __future__ import annotations

import json

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from answers import CHAIN_CALLS, CHAIN_STAGES, RECORDED_CALLS, THEME, by_stage, recorded_answer
from cli_support import recorded_task_runs
from sopforge.families import plan
from sopforge.llm.testserver import FakeLLMServer, status

pytestmark = pytest.mark.prefect
STAGES = ["context", "schema", "sop", "api_graph", "dataset", "tools", "reference", "distractors", "manipulations",
          "package"]
CALLS = RECORDED_CALLS


def assert_dependency_order(stages_in_time_order: list[str]) -> None:
    """Independent branches may interleave, but nothing happens before a stage it reads is done."""
    last = {s: i for i, s in enumerate(stages_in_time_order)}
    first = {s: stages_in_time_order.index(s) for s in last}
    for spec in plan(("sop_tools",)).stages:
        for parent in spec.parents:
            if spec.name in first and parent in last:
                assert last[parent] < first[spec.name], f"{spec.name} started before {parent} was done"


def db(cli) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True)


def prefect_post(api: str, path: str, body: dict) -> list[dict]:
    response = httpx.post(f"{api}/{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def test_offline_example_is_stored_visible_in_prefect_and_free_the_second_time(cli, prefect_api):
    first = cli("generate", "examples/themes/pharmacy_refills.yaml", "--family", "sop_tools", "--json")
    assert first.code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["status"] == "succeeded"
    assert [s["stage"] for s in summary["stages"]] == STAGES
    assert summary["llm_calls"] == CALLS and summary["input_tokens"] > 0

    with db(cli) as con:
        stored = con.execute("SELECT stage, status, family FROM artifacts ORDER BY created_at").fetchall()
        assert sorted(stored, key=str) == sorted(
            ((stage, "validated", None if stage == "context" else "sop_tools") for stage in STAGES), key=str)
        assert_dependency_order([stage for stage, _, _ in stored])
        edges = con.execute("""SELECT c.stage, p.stage FROM artifact_edges e JOIN artifacts c ON c.id = e.child
                               JOIN artifacts p ON p.id = e.parent ORDER BY 1, 2""").fetchall()
        assert edges == [("api_graph", "context"), ("api_graph", "schema"), ("api_graph", "sop"),
                         ("dataset", "context"), ("dataset", "schema"), ("dataset", "sop"),
                         ("distractors", "api_graph"), ("distractors", "context"), ("distractors", "dataset"),
                         ("distractors", "reference"), ("distractors", "schema"), ("distractors", "sop"),
                         ("distractors", "tools"),
                         ("manipulations", "context"), ("manipulations", "reference"), ("manipulations", "schema"),
                         ("manipulations", "sop"), ("manipulations", "tools"),
                         ("package", "api_graph"), ("package", "context"), ("package", "distractors"),
                         ("package", "manipulations"), ("package", "reference"), ("package", "schema"),
                         ("package", "sop"), ("package", "tools"),
                         ("reference", "api_graph"), ("reference", "dataset"), ("reference", "schema"),
                         ("reference", "sop"), ("reference", "tools"),
                         ("schema", "context"), ("sop", "context"), ("sop", "schema"),
                         ("tools", "api_graph"), ("tools", "context"), ("tools", "dataset"), ("tools", "schema"),
                         ("tools", "sop")]
        failed = con.execute("SELECT count(*) FROM validations WHERE NOT passed AND severity = 'error'").fetchone()
        assert failed == (0,)
        assert con.execute("SELECT provider, count(*) FROM llm_calls GROUP BY 1").fetchall() == [("replay", CALLS)]
        assert con.execute("SELECT count(DISTINCT row_id) FROM dataset_rows").fetchone() == (50,)
    dataset_id = summary["stages"][STAGES.index("dataset")]["artifact_id"]
    assert len(pq.read_table(cli.home / "datasets" / f"{dataset_id}.parquet")) == 50

    run_id = summary["run_id"]
    flow_runs = prefect_post(prefect_api, "flow_runs/filter", {"flow_runs": {"name": {"any_": [run_id]}}})
    assert [fr["state_type"] for fr in flow_runs] == ["COMPLETED"]
    every_run = recorded_task_runs(prefect_api, flow_runs[0]["id"], STAGES)
    task_runs = [t for t in every_run if ":" not in t["name"]]  # the stages; "<stage>: <item> k/n" are their calls
    assert sorted(t["name"] for t in task_runs) == sorted(STAGES)
    # The graph Prefect draws is the plan's dependency graph: each task run waits for its parents' runs.
    name_of = {t["id"]: t["name"] for t in task_runs}
    drawn = {t["name"]: sorted(name_of[i["id"]] for i in t["task_inputs"].get("wait_for", [])) for t in task_runs}
    assert drawn == {s.name: sorted(s.parents) for s in plan(("sop_tools",)).stages}
    # Inside a stage, independent calls are child task runs that overlap: the SOP variant types at once.
    variants = [t for t in every_run if t["name"].startswith("manipulations: variant ")]
    assert len(variants) == 7 and {t["state_type"] for t in variants} == {"COMPLETED"}
    spans = sorted((t["start_time"], t["end_time"]) for t in variants)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans
    wanted = {f"{run_id}-context", f"{run_id}-schema", f"{run_id}-schema-table", f"{run_id}-sop"}
    # Filtered by key: the session's Prefect server holds the artifacts of every test that ran before.
    keys = {a["key"] for a in prefect_post(prefect_api, "artifacts/filter",
                                           {"artifacts": {"key": {"any_": sorted(wanted)}}, "limit": 200})}
    assert wanted <= keys

    second = cli("generate", "examples/themes/pharmacy_refills.yaml", "--family", "sop_tools", "--json")
    assert second.code == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["llm_calls"] == 0
    # Every stage is reused but the package, which writes the second run's own export (no model call).
    assert {s["stage"]: s["status"] for s in again["stages"]} == {**dict.fromkeys(STAGES, "reused"), "package": "generated"}
    assert again["export"].startswith(str(cli.home / "exports" / again["run_id"]))
    with db(cli) as con:
        assert con.execute("SELECT count(*) FROM llm_calls").fetchone() == (CALLS,)
        assert con.execute("SELECT count(*) FROM artifacts").fetchone() == (len(STAGES) + 1,)

    shown = cli("show", run_id[:6], "--stage", "sop", "--json")
    assert shown.code == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert [p["stage"] for p in detail["lineage"]["parents"]] == ["context", "schema"]
    assert detail["artifact"]["content"]["text"].startswith("1. Purpose")
    assert len(detail["llm_calls"]) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_live_provider_through_its_sdk_with_a_rate_limit_retry(cli, provider):
    secret = f"sk-test-{provider}-0123456789abcdef"
    key_var = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    with FakeLLMServer(by_stage()) as server:
        server.enqueue(status(429, retry_after=0.2))
        base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
        result = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools",
                     "--provider", provider,
                     "--model", "test-model", "--base-url", base_url, "--json",
                     env={key_var: secret, "SOPFORGE_BACKOFF_BASE_SECONDS": "0.05"})
        requests = list(server.requests)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["llm_calls"] == CALLS
    assert len(requests) == CALLS + 1  # the 429, then every call
    assert all(r.protocol == provider for r in requests)
    with db(cli) as con:
        rows = con.execute("SELECT stage, provider, model, transport_attempts FROM llm_calls ORDER BY created_at").fetchall()
    assert rows[0] == ("context", provider, "test-model", 2)
    assert {(p, m, attempts) for _, p, m, attempts in rows[1:]} == {(provider, "test-model", 1)}
    stages = [r[0] for r in rows]
    assert sorted(stages[:CHAIN_CALLS]) == sorted(CHAIN_STAGES)
    assert sorted(stages[CHAIN_CALLS:]) == sorted(["distractors"] * 2 + ["manipulations"] * (CALLS - CHAIN_CALLS - 2))
    assert_dependency_order(stages)
    stored = (cli.home / "sopforge.duckdb").read_bytes()
    assert secret.encode() not in stored
    assert secret not in result.stdout + result.stderr


def test_a_failed_stage_stops_the_flow_and_a_rerun_resumes_there(cli):
    misnamed_section = recorded_answer("sop").replace("6. Output", "6. Results")
    common = ("--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools", "--provider", "openai", "--model",
              "m", "--json")
    env = {"OPENAI_API_KEY": "sk-test", "SOPFORGE_MAX_ATTEMPTS": "2"}
    with FakeLLMServer(by_stage({"sop": misnamed_section})) as server:
        failed = cli("generate", *common, "--base-url", server.openai_base_url, env=env)
    assert failed.code != 0
    error_lines = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "sop.sections_in_order" in error_lines[0] and "after 2 attempts" in error_lines[0]
    with db(cli) as con:
        assert con.execute("SELECT stage FROM artifacts ORDER BY created_at").fetchall() == [("context",), ("schema",)]
        assert con.execute("SELECT status, error IS NOT NULL FROM runs").fetchall() == [("failed", True)]
        assert con.execute("SELECT count(*) FROM llm_calls WHERE stage = 'sop'").fetchone() == (2,)

    with FakeLLMServer(by_stage()) as server:
        resumed = cli("generate", *common, "--base-url", server.openai_base_url, env=env)
        sent = len(server.requests)
    assert resumed.code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert {s["stage"]: s["status"] for s in summary["stages"]} == {
        "context": "reused", "schema": "reused", **{s: "generated" for s in STAGES[2:]}}
    # upstream stages cost nothing and the rejected SOP answers are not replayed
    assert summary["llm_calls"] == CALLS - 2 and sent == CALLS - 2


def test_a_stub_tool_is_caught_by_the_tools_gate_and_nothing_is_exported(cli):
    """Tool code that ignores its data fails the runtime checks; the flow stops before package."""
    good = recorded_answer("tools", "code")
    stub = good.replace('"drug_name": _text(row["drug_name"], "drug_name"),', '"drug_name": "lisinopril 20 mg tablet",')
    assert stub != good
    with FakeLLMServer(by_stage({"tools/code": stub})) as server:
        failed = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "sop_tools",
                     "--provider", "openai",
                     "--model", "m", "--base-url", server.openai_base_url,
                     env={"OPENAI_API_KEY": "sk-test", "SOPFORGE_MAX_ATTEMPTS": "2"})
    assert failed.code != 0
    error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "tools" in error[0] and "getPrescriptionRecord" in error[0], failed.stderr
    assert not (cli.home / "exports").exists()
    with db(cli) as con:
        stages = {s for (s,) in con.execute("SELECT stage FROM artifacts").fetchall()}
    assert stages == {"context", "schema", "sop", "api_graph", "dataset"}
