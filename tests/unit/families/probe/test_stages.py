"""PROBE stages with a scripted model: the recorded answers, and the failures each verification must catch.

Every failure is regenerated with its reasons quoted, then dropped and counted in the funnel; a stage
fails only when nothing is left.
"""

from __future__ import annotations

import json

import pytest

from sopforge.errors import ValidationFailed
from sopforge.families.probe.models.documents import parse_documents
from sopforge.families.probe.stages import bottlenecks, distractors, evidence, plans
from sopforge.families.probe.asker import RETRY_LEAD
from conftest import SLUG, recorded


def solver_verdict(action: str) -> str:
    return f'<verdict>{{"resolving_action": "{action}", "also_resolving": [], "reason": "it reaches the patient"}}</verdict>'


def not_evidence(reason: str = "about something else") -> str:
    return f'<verdict>{{"evidence_of": [], "reason": "{reason}"}}</verdict>'


def funnel_of(artifact, component: str) -> dict[str, dict]:
    return {r.item_type: r.model_dump() for r in artifact.funnel if r.component == component}


def test_the_recorded_bottlenecks_pass_and_every_solver_is_judged_unique(worlds, options, model, settings):
    llm, provider = model("probe_bottlenecks")
    result = bottlenecks.run(bottlenecks.BottlenecksInputs(theme_slug=SLUG, worlds=worlds, options=options),
                             llm=llm, settings=settings, model="m", temperature=0)
    assert [(p.persona_id, p.kept) for p in result.artifact.personas] == [("p1", [1]), ("p2", [1, 2])]
    assert len(provider.requests) == 7 and not result.artifact.drops
    judge_prompt = next(r for r in provider.requests if r.call_key.endswith("p2-b2-solver-c1/a1")).messages[0].content
    assert "solves_bottleneck" not in judge_prompt and "request_prescriber_signature" in judge_prompt


def test_a_solver_the_judge_does_not_pick_is_regenerated_then_its_bottleneck_dropped(worlds, options, model, settings):
    wrong = solver_verdict("send_pickup_reminder")
    llm, provider = model("probe_bottlenecks", {"p1-b1-solver-c1": wrong, "p1-b1-solver-c2": wrong,
                                                "p1-actions-c2": recorded("probe_bottlenecks", "p1-actions-c1")})
    result = bottlenecks.run(bottlenecks.BottlenecksInputs(theme_slug=SLUG, worlds=worlds, options=options),
                             llm=llm, settings=settings, model="m", temperature=0)
    artifact = result.artifact
    assert artifact.of("p1").kept == [] and artifact.of("p2").kept == [1, 2]
    assert funnel_of(artifact, "bottleneck")["approval"] == {
        "component": "bottleneck", "item_type": "approval", "generated": 2, "verified": 1, "retried": 1,
        "dropped": 1, "kept": 1}
    assert "solver not unique" in artifact.drops[0].reason and "send_pickup_reminder" in artifact.drops[0].reason
    second = next(r for r in provider.requests if r.call_key.endswith("p1-actions-c2/a1")).messages[0].content
    assert RETRY_LEAD in second and "send_pickup_reminder" in second
    assert any(not c.passed and c.name == "probe_bottlenecks.solvers_unique" for c in result.checks)


def test_no_bottleneck_with_a_unique_solver_fails_the_stage(worlds, options, model, settings):
    wrong = solver_verdict("revise_coverage_plan")
    overrides = {f"p{p}-b{b}-solver-c{c}": (solver_verdict("send_pickup_reminder") if p == 1 else wrong)
                 for p, b in ((1, 1), (2, 1), (2, 2)) for c in (1, 2)}
    overrides.update({f"p{p}-actions-c2": recorded("probe_bottlenecks", f"p{p}-actions-c1") for p in (1, 2)})
    llm, _ = model("probe_bottlenecks", overrides)
    with pytest.raises(ValidationFailed, match="no bottleneck has a unique solver"):
        bottlenecks.run(bottlenecks.BottlenecksInputs(theme_slug=SLUG, worlds=worlds, options=options),
                        llm=llm, settings=settings, model="m", temperature=0)


@pytest.fixture
def plan_set(worlds, bottleneck_set, options, model, settings):
    llm, _ = model("probe_plans")
    return plans.run(plans.PlansInputs(theme_slug=SLUG, worlds=worlds, bottlenecks=bottleneck_set, options=options),
                     llm=llm, settings=settings, model="m", temperature=0).artifact


def test_the_checklist_must_fill_the_solvers_parameters(worlds, bottleneck_set, options, model, settings):
    answer = recorded("probe_plans", "p1-b1-checklist").replace('"authorized_quantity": "90 tablets (90-day supply)"',
                                                                 '"quantity": "90"')
    llm, provider = model("probe_plans", {"p1-b1-checklist": answer})
    with pytest.raises(ValidationFailed, match="missing \\['authorized_quantity'\\], unknown \\['quantity'\\]"):
        plans.run(plans.PlansInputs(theme_slug=SLUG, worlds=worlds, bottlenecks=bottleneck_set, options=options),
                  llm=llm, settings=settings, model="m", temperature=0)
    assert [r.call_key for r in provider.requests] == [f"{SLUG}/probe_plans/p1-b1-checklist/a1",
                                                        f"{SLUG}/probe_plans/p1-b1-checklist/a2"]


def evidence_inputs(worlds, bottleneck_set, plan_set, options):
    return evidence.EvidenceInputs(theme_slug=SLUG, worlds=worlds, bottlenecks=bottleneck_set, plans=plan_set,
                                   options=options)


def test_recorded_evidence_is_reviewed_judged_and_sufficient(worlds, bottleneck_set, plan_set, options, model, settings):
    llm, provider = model("probe_evidence")
    artifact = evidence.run(evidence_inputs(worlds, bottleneck_set, plan_set, options), llm=llm, settings=settings,
                            model="m", temperature=0).artifact
    assert artifact.samples == ["p1-b1", "p2-b1", "p2-b2"] and len(artifact.documents) == 6
    assert all(j.conveys.evidence_of == [int(j.document.sample_id[-1])] for j in artifact.documents)
    assert {s: v.score for s, v in artifact.sufficiency.items()} == dict.fromkeys(artifact.samples, 1.0)
    reader = next(r for r in provider.requests if "p2-b2-reader" in r.call_key).messages[0].content
    assert "RX-7730915" in reader and "CHG-20418" not in reader, "the reader sees only its sample's true positives"


def test_a_bottleneck_without_evidence_is_dropped_and_counted(worlds, bottleneck_set, plan_set, options, model, settings):
    overrides = {}
    for tp in ("tp1", "tp2"):
        overrides[f"p1-b1-{tp}-c1-judge"] = overrides[f"p1-b1-{tp}-c2-judge"] = not_evidence()
        overrides[f"p1-b1-{tp}-c2"] = recorded("probe_evidence", f"p1-b1-{tp}-c1")
        overrides[f"p1-b1-{tp}-c2-review"] = recorded("probe_evidence", f"p1-b1-{tp}-c1-review")
    llm, _ = model("probe_evidence", overrides)
    result = evidence.run(evidence_inputs(worlds, bottleneck_set, plan_set, options), llm=llm, settings=settings,
                          model="m", temperature=0)
    artifact = result.artifact
    assert artifact.samples == ["p2-b1", "p2-b2"]
    reasons = {d.item: d.reason for d in artifact.drops}
    assert "independent reader judged it evidence of bottleneck(s) none" in reasons["p1-b1-tp1"]
    assert reasons["p1-b1"].startswith("bottleneck without evidence")
    assert funnel_of(artifact, "sample")["easy"]["dropped"] == 1


def test_a_low_review_score_regenerates_the_document(worlds, bottleneck_set, plan_set, options, model, settings):
    low = recorded("probe_evidence", "p2-b2-tp2-c1-review").replace('"quality_score": 8', '"quality_score": 4')
    llm, provider = model("probe_evidence", {
        "p2-b2-tp2-c1-review": low, "p2-b2-tp2-c2": recorded("probe_evidence", "p2-b2-tp2-c1"),
        "p2-b2-tp2-c2-review": recorded("probe_evidence", "p2-b2-tp2-c1-review"),
        "p2-b2-tp2-c2-judge": recorded("probe_evidence", "p2-b2-tp2-c1-judge")})
    artifact = evidence.run(evidence_inputs(worlds, bottleneck_set, plan_set, options), llm=llm, settings=settings,
                            model="m", temperature=0).artifact
    assert funnel_of(artifact, "true_positive")["calendar"]["retried"] == 1
    asked = [r.call_key.split("/")[2] for r in provider.requests]
    assert "p2-b2-tp2-c1-judge" not in asked, "a document the review refuses is not judged"
    regenerated = next(r for r in provider.requests if r.call_key.endswith("p2-b2-tp2-c2/a1")).messages[0].content
    assert "scored it 4/10" in regenerated


def test_a_distractor_that_conveys_a_bottleneck_is_replaced_by_a_natural_one(worlds, bottleneck_set, options, model,
                                                                            settings):
    natural = "<document>\n" + parse_documents(recorded("probe_distractors", "p2-bulk-email"), "email")[2].text + "\n</document>"
    llm, provider = model("probe_distractors", {
        "p2-email2-c1-judge": '<verdict>{"evidence_of": [1], "reason": "the audit mentions the reconciliation"}</verdict>',
        "p2-email2-c2": natural, "p2-email2-c2-judge": not_evidence()})
    artifact = distractors.run(distractors.DistractorsInputs(theme_slug=SLUG, worlds=worlds, bottlenecks=bottleneck_set,
                                                             options=options),
                               llm=llm, settings=settings, model="m", temperature=0).artifact
    assert funnel_of(artifact, "distractor")["email"] == {"component": "distractor", "item_type": "email",
                                                          "generated": 6, "verified": 6, "retried": 1, "dropped": 0,
                                                          "kept": 6}
    origins = [j.document.origin for j in artifact.documents if j.document.persona_id == "p2"]
    assert origins.count("natural") == 1 and origins.count("enhanced") == 1
    asked = next(r for r in provider.requests if r.call_key.endswith("p2-email2-c2/a1")).messages[0].content
    assert "evidence of bottleneck(s) 1" in asked and "Write one natural email" in asked
    assert json.dumps([j.document.text for j in artifact.documents]).count("Q1 controlled-substance audit") == 0
