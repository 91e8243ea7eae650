"""SOP-Maze in sopforge eval: the exported four-part prompt to the model, the scorer, the paper's tables with the
shortcuts beside the model (perfect, lazy and broken agents scripted through the gateway)."""

from __future__ import annotations

import json

import pytest

from maze_support import export_scripted_run, load_hrs, load_lrs
from sopforge.errors import UserError
from sopforge.evaluation.protocol import EvalContext, EvalOptions, ItemRecord
from sopforge.families import load_family
from sopforge.families.maze import evaluation
from sopforge.families.maze.verify.shortcuts import first_option_answer


@pytest.fixture
def generated(pharmacy_context, scripted, settings, tmp_path):
    """An exported maze run (the scripted writer and reader) and its maze_baselines artifact."""
    folder, report = export_scripted_run(pharmacy_context, scripted, settings, tmp_path / "exports", "r-1")
    return folder, report.model_dump(mode="json")


def context(export_dir, baselines, settings, **options) -> EvalContext:
    opts = EvalOptions(families=["maze"], provider="scripted", model="agent-x", **options)
    return EvalContext(eval_id="e-1", run_id="r-1", theme_slug="t", export_dir=export_dir, options=opts,
                       settings=settings, stage_content=lambda stage: baselines if stage == "maze_baselines" else None)


def evaluate(ctx: EvalContext, respond, scripted) -> tuple[list[ItemRecord], list]:
    gateway, provider = scripted(respond)
    records = []
    for item in evaluation.plan(ctx):
        result = evaluation.run(item, ctx, gateway)
        records.append(ItemRecord(family="maze", suite=item.suite, agent=item.agent, item_id=item.item_id,
                                  **result.model_dump()))
    return records, provider.requests


def subtask_of(export_dir, prompt: str) -> dict:
    rows = [json.loads(line) for line in (export_dir / "maze" / "subtasks.jsonl").read_text().splitlines()]
    return next(r for r in rows if r["input"] == prompt)


def test_the_family_declares_its_evaluation():
    assert load_family("maze").evaluation is evaluation.EVALUATION and evaluation.EVALUATION.suites == ("subtasks",
                                                                                                         "finals")


def test_the_model_gets_the_exported_prompt_and_a_perfect_agent_scores_100(generated, settings, scripted):
    export_dir, baselines = generated
    ctx = context(export_dir, baselines, settings)
    records, requests = evaluate(ctx, lambda r: json.dumps(subtask_of(export_dir, r.messages[0].content)["target"]),
                                 scripted)
    subtasks = [json.loads(line) for line in (export_dir / "maze" / "subtasks.jsonl").read_text().splitlines()]
    assert len(requests) == len(subtasks)   # one call per subtask; the shortcuts ask nothing
    assert {r.messages[0].content for r in requests} == {s["input"] for s in subtasks}
    assert requests[0].call_key.startswith("t/eval_maze/subtasks.fc.") and requests[0].call_key.endswith("/t1")
    tables = evaluation.report(records, ctx)
    (subtask_table, final_table) = tables.tables
    model_row = subtask_table.rows[0]
    assert model_row[:5] == ["agent-x (fc)", "100", "100", "100", "100"]
    assert model_row[5] == f"{len(subtasks)} / 0 / 0"
    assert [row[0] for row in final_table.rows] == ["agent-x (fc)", "majority", "first_turn", "last_turn", "first_option"]
    for row in subtask_table.rows[1:] + final_table.rows[1:]:   # every shortcut stays below the 35 gate
        assert float(row[3]) < 35, row
    assert tables.facts["finals"]["fc"]["items"] == sum(s["final"] for s in subtasks)


def test_a_lazy_agent_scores_the_format_credit_and_a_broken_one_zero(generated, settings, scripted):
    export_dir, baselines = generated
    scenarios = {s.name: s for s in (load_lrs(), load_hrs())}
    lazy = lambda r: json.dumps(first_option_answer(scenarios[subtask_of(export_dir, r.messages[0].content)["scenario"]]))  # noqa: E731
    ctx = context(export_dir, baselines, settings, limit=6)
    records, _ = evaluate(ctx, lazy, scripted)
    model = [r for r in records if r.agent == "fc"]
    assert len(model) == 6 and {r.score["score"] for r in model} == {0.2} and not any(r.error for r in model)
    records, _ = evaluate(ctx, lambda r: "I would refill it.", scripted)
    broken = [r for r in records if r.agent == "fc"]
    assert {r.score["score"] for r in broken} == {0.0} and all("answer scores 0" in r.error for r in broken)
    row = evaluation.report(records, ctx).tables[0].rows[0]
    assert row[3] == "0" and row[5] == "0 / 0 / 6"


def test_an_export_without_subtasks_is_refused_with_the_fix(settings, tmp_path):
    ctx = context(tmp_path / "nothing", None, settings)
    with pytest.raises(UserError, match="no SOP-Maze subtasks to evaluate.*--family maze"):
        evaluation.plan(ctx)
