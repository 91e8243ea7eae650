"""PROBE in sopforge eval: the plan, the paper's metrics for a scripted perfect, lazy and wrong agent, the
baselines (no LLM), the judge-agreement suite and the report.

The export comes from the synthetic model; the agents and judges are scripted fakes answering from the
ground truth (a perfect agent), with nothing (a lazy one) or with a wrong action.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sopforge.errors import UserError
from sopforge.evaluation.protocol import EvalContext, EvalOptions, ItemRecord
from sopforge.families.probe.baselines import BASELINES
from sopforge.families.probe.evaluation import AGREEMENT, EVALUATION, SUITE, judge_set
from sopforge.families.probe.export.samples import write_export
from sopforge.llm.gateway import Gateway
from sopforge.llm.providers.scripted import ScriptedProvider
from conftest import synthetic_chain

CORRECT_T24 = ('<verdict>{"judgment": "CORRECT", "essential_details_analysis": {"who_blocked": "correct", "who_blocker": '
               '"correct", "what_task": "correct", "why_root_cause": "correct"}, "non_essential_details_analysis": '
               '{"when_deadline": "correct", "where_system": "n/a", "how_mechanism": "n/a", "impact_scope": "n/a"}, '
               '"reasoning": "same"}</verdict>')
CORRECT_T25 = ('<verdict>{"judgment": "CORRECT", "reasoning": "all there", "parameter_analysis": {"critical_parameters_met": '
               'true, "would_resolve_bottleneck": "yes"}, "confidence": 0.9}</verdict>')


@pytest.fixture
def exported(context, settings, tmp_path):
    from sopforge.families.probe.options import ProbeSpec

    small = ProbeSpec(personas=2, difficulties=["easy", "hard"], bottlenecks={"easy": 1, "medium": 2, "hard": 2},
                      actions={"easy": 6, "medium": 8, "hard": 8}, evidence_documents={"easy": 2, "medium": 2, "hard": 2},
                      distractors={"email": 3, "calendar": 2, "document": 2}, enhanced={"easy": 0, "medium": 0, "hard": 0},
                      words={"email": [60, 220], "calendar": [40, 160], "document": [80, 260]}, hard_negatives=1,
                      max_documents=12, token_budget=5000)
    out, _ = synthetic_chain(context, small, settings)
    exports = tmp_path / "exports"
    write_export(exports / "run1" / "probe", out["probe_assembly"], {})
    return exports / "run1", out["probe_assembly"]


def context_for(export_dir: Path, settings, **options) -> EvalContext:
    return EvalContext(eval_id="e1", run_id="run1", theme_slug="pharmacy_refills", export_dir=export_dir,
                       options=EvalOptions(families=["probe"], provider="scripted", model="m", **options),
                       settings=settings)


def agent_model(records: dict[str, dict], settings, behaviour: str):
    """A scripted model: the agent answers by ``behaviour``; the judges always say CORRECT."""
    def respond(request) -> str:
        prompt = request.messages[0].content
        if "<datastore>" in prompt:
            sid = next(s for s in records if all(d["id"] in prompt for d in records[s]["agent_input"]["datastore"]))
            truth = records[sid]["ground_truth"]
            if behaviour == "unreadable":
                return "I would escalate this to the manager."
            if behaviour == "lazy":
                return '<answer>{"retrieved_documents": [], "bottleneck": "", "action": {"function_name": ""}}</answer>'
            action = truth["action"] if behaviour == "perfect" else "not_" + truth["action"]
            return "<answer>" + json.dumps({"retrieved_documents": truth["true_positives"],
                                            "bottleneck": truth["bottleneck"]["description"],
                                            "action": {"function_name": action,
                                                       "parameters": truth["expected_parameters"]}}) + "</answer>"
        return CORRECT_T24 if "who_blocked" in prompt else CORRECT_T25

    provider = ScriptedProvider(respond)
    return Gateway(provider, ledger=None, settings=settings, sleep=lambda _s: None), provider


def records_of(export_dir: Path) -> dict[str, dict]:
    lines = (export_dir / "probe" / "samples.jsonl").read_text().splitlines()
    return {r["sample_id"]: r for r in map(json.loads, lines)}


def test_the_plan_has_the_model_and_every_baseline_per_sample_and_the_judge_set(exported, settings):
    export_dir, sample_set = exported
    items = EVALUATION.plan(context_for(export_dir, settings))
    samples = [s.sample_id for s in sample_set.samples]
    assert [(i.agent, i.item_id) for i in items if i.suite == SUITE] == [
        (a, s) for s in samples for a in ("fc", *BASELINES)]
    assert len([i for i in items if i.suite == AGREEMENT]) == len(judge_set(settings.project_root)) == 19
    assert {i.item_id for i in EVALUATION.plan(context_for(export_dir, settings, limit=1)) if i.suite == SUITE} == {samples[0]}
    with pytest.raises(UserError, match="has no PROBE export .* generate it with --family probe first"):
        EVALUATION.plan(context_for(export_dir.parent / "missing", settings))


def test_a_perfect_agent_scores_one_a_lazy_one_zero_and_a_wrong_action_asks_no_parameter_judge(exported, settings):
    export_dir, _ = exported
    ctx, records = context_for(export_dir, settings), records_of(export_dir)
    item = next(i for i in EVALUATION.plan(ctx) if i.suite == SUITE and i.agent == "fc")
    llm, provider = agent_model(records, settings, "perfect")
    perfect = EVALUATION.run(item, ctx, llm)
    assert perfect.error is None and {k: perfect.score[k] for k in ("f1", "identification", "resolution")} == {
        "f1": 1.0, "identification": 1.0, "resolution": 1.0}
    keys = [r.call_key for r in provider.requests]
    assert keys == [f"pharmacy_refills/eval_probe/probe.fc.{item.item_id}/t{t}/a1" for t in (1, 2, 3)]
    assert "solves_bottleneck" not in provider.requests[0].messages[0].content

    llm, provider = agent_model(records, settings, "lazy")
    lazy = EVALUATION.run(item, ctx, llm)
    assert (lazy.score["f1"], lazy.score["identification"], lazy.score["resolution"]) == (0.0, 0.0, 0.0)
    assert len(provider.requests) == 1, "nothing stated, nothing judged"

    llm, provider = agent_model(records, settings, "wrong")
    wrong = EVALUATION.run(item, ctx, llm)
    assert wrong.score["action_correct"] is False and wrong.score["resolution"] == 0.0
    assert len(provider.requests) == 2, "identification is judged, the parameters of a wrong action are not"

    llm, _ = agent_model(records, settings, "unreadable")
    broken = EVALUATION.run(item, ctx, llm)
    assert broken.error and "no JSON answer found" in broken.error and broken.score == {}


def test_baselines_need_no_model_and_the_report_puts_them_beside_the_agent(exported, settings):
    export_dir, sample_set = exported
    ctx, records = context_for(export_dir, settings), records_of(export_dir)
    llm, provider = agent_model(records, settings, "perfect")
    results = []
    for item in (i for i in EVALUATION.plan(ctx) if i.suite == SUITE):
        before = len(provider.requests)
        result = EVALUATION.run(item, ctx, llm)
        if item.agent in BASELINES:
            assert len(provider.requests) == before, f"{item.agent} asked a model"
            got = result.output["answer"]["retrieved_documents"]
            expected = 0 if item.agent == "empty" else len(records[item.item_id]["ground_truth"]["true_positives"])
            assert len(got) == expected and result.score["identification"] == 0.0
        results.append(ItemRecord(family="probe", suite=item.suite, agent=item.agent, item_id=item.item_id,
                                  score=result.score, error=result.error))
    results.append(ItemRecord(family="probe", suite=SUITE, agent="fc", item_id="broken", error="unreadable"))
    report = EVALUATION.report(results, ctx)
    table = report.tables[0]
    assert [row[0] for row in table.rows] == ["fc", *BASELINES]
    fc = report.facts["fc"]
    n = len(sample_set.samples)
    assert fc["samples"] == n + 1 and fc["errors"] == 1 and fc["f1"] == round(n / (n + 1), 3), "an error scores 0"
    assert report.facts["empty"]["f1"] == 0.0


def test_the_judges_are_measured_against_the_annotated_set(exported, settings):
    export_dir, _ = exported
    ctx = context_for(export_dir, settings)
    agreement = [i for i in EVALUATION.plan(ctx) if i.suite == AGREEMENT]
    llm, _ = agent_model({}, settings, "perfect")  # a judge that says CORRECT to everything
    records = []
    for item in agreement:
        result = EVALUATION.run(item, ctx, llm)
        assert result.score["agree"] == (item.payload["label"] == "CORRECT")
        records.append(ItemRecord(family="probe", suite=AGREEMENT, agent="judge", item_id=item.item_id,
                                  score=result.score))
    report = EVALUATION.report(records, ctx)
    rows = {row[0]: row for row in report.tables[-1].rows}
    correct = {j: sum(i.payload["label"] == "CORRECT" for i in agreement if i.payload["judge"] == j)
               for j in ("identification", "parameters")}
    assert rows["identification"][2] == f"{correct['identification'] / 12:.0%}"
    assert report.facts["judge_agreement_parameters"] == round(correct["parameters"] / 7, 3)
