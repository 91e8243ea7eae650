"""The SOP-Maze family end to end: the CLI in a subprocess, a real Prefect server, real DuckDB."""

from __future__ import annotations

import json

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from answers import MAZE_CALLS, THEME, by_stage, recorded_answer
from sopforge.families import plan
from sopforge.llm.testserver import FakeLLMServer

pytestmark = pytest.mark.prefect
STAGES = ["context", "maze_lrs", "maze_hrs", "maze_instances", "maze_baselines", "maze_package"]


def unreachable_option_answer() -> str:
    """The recorded LRS scenario with option 1.06 widened so that it covers 1.05 whenever 1.05 holds."""
    good = recorded_answer("maze_lrs")
    bad = good.replace('"days_since_last_fill >= 24", "insurance_status in [inactive, not_on_file]"',
                       '"days_since_last_fill >= 24", "insurance_status != inactive"')
    assert bad != good
    return bad


def db(cli) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True)


def test_the_example_builds_one_lrs_and_one_hrs_scenario_with_verified_instances(cli, prefect_api):
    first = cli("generate", "examples/themes/pharmacy_refills.yaml", "--family", "maze", "--json")
    assert first.code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["status"] == "succeeded"
    assert [s["stage"] for s in summary["stages"]] == STAGES
    assert summary["llm_calls"] == 1 + MAZE_CALLS   # the shared context, then every maze recording once
    maze = summary["families"]["maze"]
    paper = {row[0]: row[1:] for row in maze["tables"][0]["rows"]}
    assert paper["instances"] == ["10", "397"] and paper["scenarios (LRS / HRS)"] == ["2 (1 / 1)", "23 (13 / 10)"]
    baselines = {row[0]: row[3:] for row in maze["tables"][1]["rows"]}
    assert baselines == {"refill_contact_disposition": ["0.36 (1 exact)", "0.52 (2 exact)", "0.20 (0 exact)"],
                         "automated_refill_line": ["0.52 (2 exact)", "0.20 (0 exact)", "0.20 (0 exact)"]}
    run_id = summary["run_id"]

    with db(cli) as con:
        families = dict(con.execute("SELECT stage, family FROM artifacts").fetchall())
        assert families == {"context": None, **dict.fromkeys(STAGES[1:], "maze")}
        edges = con.execute("""SELECT c.stage, p.stage FROM artifact_edges e JOIN artifacts c ON c.id = e.child
                               JOIN artifacts p ON p.id = e.parent ORDER BY 1, 2""").fetchall()
        assert edges == sorted((s.name, parent) for s in plan(("maze",)).stages for parent in s.parents)
        funnel = con.execute("SELECT stage, family, item_type, generated, verified, retried, dropped, kept FROM funnel "
                             "ORDER BY ordinal").fetchall()
        assert funnel == [("maze_instances", "maze", "LRS", 5, 5, 1, 0, 5), ("maze_instances", "maze", "HRS", 5, 5, 0, 0, 5)]
        gates = con.execute("SELECT a.stage, r.decision, r.source FROM reviews r JOIN artifacts a ON a.id = r.artifact_id "
                            "ORDER BY a.stage").fetchall()
        assert gates == [("maze_hrs", "approve", "auto"), ("maze_lrs", "approve", "auto"),
                         ("maze_package", "approve", "auto")]
        assert con.execute("SELECT count(*) FROM validations WHERE NOT passed AND severity = 'error'").fetchone() == (0,)
        calls = dict(con.execute("SELECT stage, count(*) FROM llm_calls GROUP BY 1").fetchall())
        assert calls == {"context": 1, "maze_lrs": 1, "maze_hrs": 1, "maze_instances": 22, "maze_baselines": 10}

    export = cli.home / "exports" / run_id / "maze"
    metadata = json.loads((export / "metadata.json").read_text())
    assert metadata["statistics"]["instances"] == 10 and metadata["statistics"]["repaired"] == 1
    assert all(metadata["statistics"]["noise_phenomena"].values())   # every phenomenon at least once
    assert set(metadata["statistics"]["path_kinds"]) == {"LRS:1", "LRS:2", "LRS:3", "LRS:4", "LRS:5", "HRS:end",
                                                         "HRS:advance", "HRS:answer"}
    assert len(pq.read_table(export / "instances.parquet")) == 10
    for scenario in ("refill_contact_disposition", "automated_refill_line"):
        assert (export / scenario / "prompt_template.txt").read_text().startswith("【Background】")
        assert json.loads((export / scenario / "schema.json").read_text())["additionalProperties"] is False

    # Prefect drew the family's real graph: the two scenario stages wait only for the context
    flow_runs = httpx.post(f"{prefect_api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [run_id]}}},
                           timeout=30).json()
    task_runs = httpx.post(f"{prefect_api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_runs[0]["id"]]}}},
                           timeout=30).json()
    name_of = {t["id"]: t["name"] for t in task_runs}
    drawn = {t["name"]: sorted(name_of[i["id"]] for i in t["task_inputs"].get("wait_for", [])) for t in task_runs}
    assert drawn == {s.name: sorted(s.parents) for s in plan(("maze",)).stages}

    shown = cli("show", run_id, "--stage", "maze_hrs", "--json")
    assert shown.code == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert detail["artifact"]["content"]["name"] == "automated_refill_line"
    assert [p["stage"] for p in detail["lineage"]["parents"]] == ["context"]

    again = cli("rerun", run_id, "--from", "maze_baselines", "--json")
    assert again.code == 0, again.stderr
    rerun = json.loads(again.stdout)
    statuses = {s["stage"]: s["status"] for s in rerun["stages"]}
    assert statuses == {**dict.fromkeys(STAGES[:4], "reused"), "maze_baselines": "generated", "maze_package": "generated"}
    assert rerun["llm_calls"] == 10   # only the first-turn reader asked again (same answers, same content)


def test_a_scenario_with_an_unreachable_option_stops_the_family_with_one_line(cli):
    env = {"OPENAI_API_KEY": "sk-test", "SOPFORGE_MAX_ATTEMPTS": "2"}
    with FakeLLMServer(by_stage({"maze_lrs": unreachable_option_answer()})) as server:
        failed = cli("generate", "--theme", THEME, "--slug", "pharmacy_refills", "--family", "maze",
                     "--provider", "openai", "--model", "m", "--base-url", server.openai_base_url, env=env)
    assert failed.code == 1
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "maze_lrs: check maze.lrs.reachable failed after 2 attempts" in errors[0]
    assert "1.05: whenever it holds, so does 1.06" in errors[0]
    with db(cli) as con:
        stages = {s for (s,) in con.execute("SELECT stage FROM artifacts").fetchall()}
        assert stages <= {"context", "maze_hrs"} and "maze_instances" not in stages
    assert not (cli.home / "exports").exists()
