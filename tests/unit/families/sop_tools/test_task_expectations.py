"""The computed expectations are plain SQL (``task_expectations``, migration 009), the summary and the review page.

A ground-truth artifact computed from the recorded example is stored in a real DuckDB file; a user
then asks for paths and writes without unpacking the artifact's JSON.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from sopforge.families.sop_tools import render
from sopforge.families.sop_tools.family import FAMILY
from sopforge.families.sop_tools.models.ground_truth import ExpectedCall, GroundTruth, ReferenceProcedure, Task
from sopforge.families.sop_tools.models.trajectory import AgentReport, PathRow
from sopforge.store import ArtifactWrite, Store

DECISION = {"request_id": "RR-1", "refill_decision": "deny", "blocking_reason": "schedule_ii_not_refillable"}


def ground_truth() -> GroundTruth:
    def task(task_id: str, path: list[str], state: dict) -> Task:
        return Task(task_id=task_id, row_index=int(task_id[-1]) - 1, inputs={"request_id": task_id}, hidden={},
                    expected_outputs={"refill_decision": "deny"},
                    expected_calls=[ExpectedCall(tool=t, input={}, output={}) for t in path], expected_path=path,
                    expected_state=state, order_constraints=[[path[0], path[-1]]])

    tasks = [task("RR-1", ["getRecord", "recordDecision"], {"refill_decisions": {"RR-1": DECISION}}),
             task("RR-2", ["getRecord", "getAge", "sendRenewal", "recordDecision"],
                  {"renewal_requests": {"RR-2": {"request_id": "RR-2"}}, "refill_decisions": {"RR-2": DECISION}})]
    baseline = AgentReport(agent="read_only", description="every read, no write", n_tasks=2, outputs=0.5,
                           final_state=0.0, order=1.0, success=0.0)
    paths = [PathRow(path=t.expected_path, tasks=1, task_ids=[t.task_id], outcomes=["refill_decision=deny"],
                     writes=sorted(t.expected_state)) for t in tasks]
    return GroundTruth(procedure=ReferenceProcedure(source="def run_procedure(m, c):\n    return {}\n"),
                       id_field="request_id", rows_total=2, tasks=tasks, excluded=[],
                       coverage={"refill_decision": {"deny": 2}}, columns=["request_id", "refill_decision"],
                       input_columns=["request_id"], hidden_columns=[], intermediate_columns=[],
                       output_columns=["refill_decision"], write_tools=["sendRenewal", "recordDecision"],
                       state_tables=["renewal_requests", "refill_decisions"], paths=paths, baselines=[baseline],
                       gates={"min_distinct_paths": 2, "max_baseline_state_success": 0.5})


def test_task_expectations_answer_path_and_write_questions_in_plain_sql(tmp_path: Path):
    store = Store(tmp_path / "sopforge.duckdb", lock_timeout=20)
    run_id = store.create_run("pharmacy refills", "pharmacy_refills", {"provider": "scripted"})
    store.save_artifact(ArtifactWrite(run_id=run_id, stage="reference", kind="ground_truth",
                                      content=ground_truth().model_dump(mode="json"), input_key="k", status="validated"))
    con = duckdb.connect(str(tmp_path / "sopforge.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT task_id, row_index, expected_path, num_expected_calls, expected_writes "
                           "FROM task_expectations WHERE run_id = ? ORDER BY row_index", [run_id]).fetchall()
        paths = con.execute("SELECT array_to_string(expected_path, ' > '), count(*) FROM task_expectations "
                            "GROUP BY 1 ORDER BY 1").fetchall()
        state = con.execute("SELECT expected_state->'$.refill_decisions.\"RR-1\".blocking_reason' "
                            "FROM task_expectations WHERE task_id = 'RR-1'").fetchone()[0]
    finally:
        con.close()
    assert rows == [("RR-1", 0, ["getRecord", "recordDecision"], 2, ["refill_decisions"]),
                    ("RR-2", 1, ["getRecord", "getAge", "sendRenewal", "recordDecision"], 4,
                     ["renewal_requests", "refill_decisions"])]
    assert paths == [("getRecord > getAge > sendRenewal > recordDecision", 1), ("getRecord > recordDecision", 1)]
    assert state == '"schedule_ii_not_refillable"'


def test_the_summary_and_the_review_page_show_paths_writes_and_baselines():
    content = ground_truth().model_dump(mode="json")
    package = {"sopbench_folder": "/x/pharmacy_refills", "oracle": {"summary": "oracle on 2 tasks: ..."},
               "baselines": content["baselines"], "gates": content["gates"]}
    summary = FAMILY.summarize({"reference": content, "package": package})
    titles = [t.title for t in summary.tables]
    assert titles[1].startswith("path coverage (2 distinct tool paths, at least 2 required")
    assert summary.tables[1].rows[1] == ("getRecord > getAge > sendRenewal > recordDecision", "1",
                                         "refill_decisions, renewal_requests", "refill_decision=deny")
    assert titles[2] == ("baseline agents replayed through the tools (final-state success must stay at or below "
                         "0.50)")
    assert summary.tables[2].rows == [("read_only", "0.50", "0.00", "1.00", "0.00")]
    assert summary.facts["distinct_paths"] == 2 and summary.facts["baselines"]["read_only"]["final_state"] == 0.0
    assert "paths: 2 distinct; write tools: sendRenewal, recordDecision" in summary.lines
    page = render.reference_markdown(content)
    assert "## Path coverage\n\n2 distinct tool paths (at least 2 required)." in page
    assert "| P2 | getRecord → getAge → sendRenewal → recordDecision | 1 |" in page
    assert "## Baseline agents\n\nFinal-state success must stay at or below 0.50." in page
    assert "Write tools: sendRenewal, recordDecision." in page


@pytest.mark.parametrize("scorer", ["oracle", "trajectory", "agent"])
def test_the_scorers_are_declared_by_the_family(scorer):
    assert callable(FAMILY.scorers[scorer])
