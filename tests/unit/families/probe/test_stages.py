"""PROBE stages on the synthetic model (valid, meaningless answers): what each stage asks, keeps and drops.

Positive paths run on :mod:`synthetic`; every failure is a hand-written answer for one call (a deliberate
failure), which must be regenerated with its reasons quoted, then dropped and counted; a stage fails only
when nothing is left.
"""

from __future__ import annotations

import json
import re

import pytest

from sopforge.errors import ValidationFailed
from sopforge.families.probe.asker import RETRY_LEAD
from sopforge.families.probe.models.documents import document_id
from sopforge.families.probe.options import ProbeSpec
from sopforge.families.probe.stages.distractors import DistractorsInputs, planned_asks
from sopforge.families.probe.stages.verified import documents_per_ask
from conftest import synthetic_chain

SAMPLES = ["p1-b1", "p2-b1", "p2-b2"]


@pytest.fixture
def small() -> ProbeSpec:
    return ProbeSpec(personas=2, difficulties=["easy", "hard"], bottlenecks={"easy": 1, "medium": 2, "hard": 2},
                     actions={"easy": 6, "medium": 8, "hard": 8}, evidence_documents={"easy": 2, "medium": 2, "hard": 2},
                     distractors={"email": 3, "calendar": 2, "document": 2}, enhanced={"easy": 0, "medium": 1, "hard": 1},
                     words={"email": [60, 220], "calendar": [40, 160], "document": [80, 260]}, hard_negatives=1,
                     max_documents=12, token_budget=5000, hardening_rounds=2, max_retries=1)


def funnel_of(artifact, component: str) -> dict[str, dict]:
    return {r.item_type: r.model_dump() for r in artifact.funnel if r.component == component}


def items(provider, stage: str) -> list[str]:
    return [r.call_key.split("/")[2] for r in provider.requests if r.call_key.split("/")[1] == stage]


def prompt_of(provider, item: str) -> str:
    return next(r for r in provider.requests if r.call_key.split("/")[2] == item).messages[0].content


def test_each_sample_gets_its_own_distractors_in_small_asks_and_no_datastore_shares_a_document(context, small, settings):
    out, provider = synthetic_chain(context, small, settings)
    samples = out["probe_assembly"].samples
    assert [s.sample_id for s in samples] == SAMPLES
    asked = items(provider, "probe_distractors")
    assert {i for i in asked if re.fullmatch(r"p\d-b\d-(email|calendar|document)-q\d", i)} == {
        f"{sid}-{kind}-q1" for sid in SAMPLES for kind in ("email", "calendar", "document")}
    pools = {sid: out["probe_distractors"].kept(sample_id=sid) for sid in SAMPLES}
    assert {sid: len(docs) for sid, docs in pools.items()} == dict.fromkeys(SAMPLES, 7)
    stores = [set(s.datastore) for s in samples]
    assert not (stores[0] & stores[1]) and not (stores[1] & stores[2]) and not (stores[0] & stores[2])
    sibling_texts = {out["probe_assembly"].documents[i].text for i in samples[1].datastore}
    assert not sibling_texts & {out["probe_assembly"].documents[i].text for i in samples[2].datastore}
    origins = [d.origin for d in pools["p2-b1"]]
    assert origins.count("enhanced") == 1 and "enhanced" not in [d.origin for d in pools["p1-b1"]]
    asked = {stage: len(items(provider, stage)) for stage in small.first_try_calls()}
    assert asked == small.first_try_calls(settings.max_tokens), "the pre-run estimate counts every first-try call"


def test_every_attack_is_measured_against_random_on_every_sample(context, small, settings):
    out, _ = synthetic_chain(context, small, settings)
    artifact = out["probe_assembly"]
    names = {a.name for a in artifact.samples[1].attacks}
    assert {"bm25_task", "bm25_persona", "bm25_actions", "bm25_per_action", "tfidf_task", "tfidf_persona",
            "tfidf_actions", "tfidf_per_action", "recency", "near_duplicate", "cross_sample", "title_adversary",
            "title_adversary_action", "persona_adversary", "action_overlap"} <= names
    assert "cross_sample" not in {a.name for a in artifact.samples[0].attacks}, "p1 has no sibling sample"
    for a in artifact.samples[1].attacks:
        assert a.random == (round(2 / 10, 4) if a.kind == "search" else round(1 / 8, 4))
    table = {row["attack"]: row for row in artifact.attack_table}
    assert table["cross_sample"]["samples"] == 2 and table["recency"]["samples"] == 3
    assert all(0 <= row["set_p_value"] <= 1 for row in artifact.attack_table)


def test_distractors_are_asked_as_many_at_a_time_as_fit_one_answer(context, small, settings):
    assert documents_per_ask(2600, 8192, 4) == 1 and documents_per_ask(1100, 8192, 4) == 3
    assert documents_per_ask(220, 8192, 4) == 4 and documents_per_ask(5000, 2000, 4) == 1
    out, _ = synthetic_chain(context, small, settings, until="probe_bottlenecks")
    paper = ProbeSpec(distractors={"email": 7, "document": 3}, words={"email": [450, 1100], "calendar": [250, 700],
                                                                      "document": [1100, 2600]})
    asks = planned_asks(DistractorsInputs(theme_slug="t", worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"],
                                          options=paper), max_tokens=8192)
    first = [a for a in asks if a.sid == "p1-b1"]
    assert [(a.kind, a.count, a.first) for a in first] == [("email", 3, 1), ("email", 3, 4), ("email", 1, 7),
                                                          ("document", 1, 1), ("document", 1, 2), ("document", 1, 3)]
    assert all(len(a.areas) == 2 for a in first) and len({a.areas for a in first}) > 1


def _picks_the_evidence(synthetic, sid: str, solver: str, reasoning: str):
    """A title adversary answer that names the sample's current true positives and the solver."""
    def answer(prompt: str) -> str:
        listed = re.findall(r"^- (d[0-9a-f]{8}) \|", prompt, re.M)
        texts = [t for item in synthetic.answers if re.fullmatch(rf"{sid}-(r\d+-)?tp\d+-c\d+", item)
                 for t in synthetic.documents_of(item)]
        evidence = [i for i in listed if any(document_id(t, sid) == i for t in texts)]
        return "<verdict>" + json.dumps({"documents": evidence[:2], "action": solver, "reasoning": reasoning}) + "</verdict>"
    return answer


def test_a_sample_the_adversary_solves_is_revised_with_its_reasoning_and_then_kept(context, small, settings):
    from synthetic import SyntheticProbe

    synthetic = SyntheticProbe()
    reasoning = "both items are the only ones whose subjects name a case and a near deadline"
    synthetic.overrides["p1-b1-adversary-r0"] = _picks_the_evidence(synthetic, "p1-b1", "routine_step_1", reasoning)
    out, provider = synthetic_chain(context, small, settings, synthetic=synthetic)
    first_tps = {d.id for d in out["probe_evidence"].kept(sample_id="p1-b1")}
    artifact = out["probe_assembly"]
    sample = next(s for s in artifact.samples if s.sample_id == "p1-b1")
    assert [r.solved_by for r in sample.rounds] == [["title_adversary", "title_adversary_action"], []]
    assert any("rewrote true positive" in c for c in sample.rounds[0].revised)
    assert any("added camouflage" in c for c in sample.rounds[0].revised)
    assert not first_tps & set(sample.true_positives), "the evidence was rewritten"
    # each rewritten true positive gets a camouflage item with its surface (the rewrite gave it a new id, and
    # once no camouflage mirrored it), then two more in the areas of other actions (the action was picked too)
    assert sum(artifact.documents[i].origin == "camouflage" for i in sample.datastore) == 4
    rewritten = [artifact.documents[i] for i in sample.true_positives]
    mirrors = [prompt_of(provider, f"p1-b1-r1-camo{n}-c1") for n in (1, 2)]
    assert all(f"the same sender: {tp.sender}" in m and f"the same date: {tp.date}" in m
               for tp, m in zip(rewritten, mirrors))
    # and at least as long, so the evidence is not the longest of its look-alikes
    assert all(int(re.search(r"has a body of (\d+)-", m).group(1)) >= min(tp.words, small.words[tp.kind][1] - 10)
               for tp, m in zip(rewritten, mirrors))
    assert funnel_of(artifact, "hardening")["round 1"] == {"component": "hardening", "item_type": "round 1",
                                                           "generated": 1, "verified": 1, "retried": 0,
                                                           "dropped": 0, "kept": 1}
    assert funnel_of(artifact, "revision")["true_positive"]["kept"] == 2
    assert reasoning in prompt_of(provider, "p1-b1-r1-tp1-c1") and reasoning in prompt_of(provider, "p1-b1-r1-tp2-c1")
    assert "p1-b1-r1-reader" in items(provider, "probe_assembly"), "rewritten evidence is read again for sufficiency"
    assert funnel_of(artifact, "shortcut_gate")["easy"]["retried"] == 1


def test_a_sample_still_solved_when_the_rounds_run_out_is_dropped_with_why(context, small, settings):
    from synthetic import SyntheticProbe

    synthetic = SyntheticProbe()
    one_round = small.model_copy(update={"hardening_rounds": 1})
    for rnd in (0, 1):
        synthetic.overrides[f"p2-b2-adversary-r{rnd}"] = _picks_the_evidence(synthetic, "p2-b2", "routine_step_2",
                                                                             "the evidence is dated last")
    out, _ = synthetic_chain(context, one_round, settings, synthetic=synthetic)
    artifact = out["probe_assembly"]
    assert [s.sample_id for s in artifact.samples] == ["p1-b1", "p2-b1"]
    drop = next(d for d in artifact.drops if d.item == "p2-b2" and d.component == "shortcut_gate")
    assert "still solved after 1 hardening round(s)" in drop.reason
    assert "title_adversary (F1 1.00 vs random 0.17" in drop.reason and "the evidence is dated last" in drop.reason
    assert funnel_of(artifact, "hardening")["round 1"]["dropped"] == 1
    check = next(c for c in out["probe_assembly:checks"] if c.name == "probe_assembly.shortcut_gate")
    assert not check.passed and check.severity == "warning"


def test_the_stage_fails_only_when_every_sample_is_still_solved(context, small, settings):
    from synthetic import SyntheticProbe

    synthetic = SyntheticProbe()
    no_rounds = small.model_copy(update={"hardening_rounds": 0})
    for sid, solver in (("p1-b1", "routine_step_1"), ("p2-b1", "routine_step_1"), ("p2-b2", "routine_step_2")):
        synthetic.overrides[f"{sid}-adversary-r0"] = _picks_the_evidence(synthetic, sid, solver, "titles")
    with pytest.raises(ValidationFailed, match="every sample is still solved by a shortcut attack after 0 hardening"):
        synthetic_chain(context, no_rounds, settings, synthetic=synthetic)


def test_a_solver_the_judge_does_not_pick_is_regenerated_then_its_bottleneck_dropped(context, small, settings):
    wrong = '<verdict>{"resolving_action": "routine_step_5", "also_resolving": [], "reason": "it fits better"}</verdict>'
    out, provider = synthetic_chain(context, small, settings, until="probe_bottlenecks",
                                    overrides={"p2-b2-solver-c1": wrong, "p2-b2-solver-c2": wrong})
    artifact = out["probe_bottlenecks"]
    assert artifact.of("p1").kept == [1] and artifact.of("p2").kept == [1]
    assert "solver not unique" in artifact.drops[0].reason and "routine_step_5" in artifact.drops[0].reason
    second = prompt_of(provider, "p2-actions-c2")
    assert RETRY_LEAD in second and "routine_step_5" in second


def test_a_persona_adversary_that_beats_chance_regenerates_the_actions_then_drops_the_bottleneck(context, small,
                                                                                                settings):
    guess = '<verdict>{"action": "routine_step_1", "reasoning": "goal 1 says the form is late"}</verdict>'
    many = ProbeSpec.model_validate({**small.model_dump(), "actions": {"easy": 6, "medium": 8, "hard": 26}})
    overrides = {"p2-persona-adversary-c1": guess, "p2-persona-adversary-c2": guess,
                 "p1-persona-adversary-c1": guess}
    out, provider = synthetic_chain(context, many, settings, until="probe_bottlenecks", overrides=overrides)
    artifact = out["probe_bottlenecks"]
    assert artifact.of("p2").kept == [2], "1 of 26 actions: picking the solver beats chance (0.038 < 0.05)"
    assert artifact.of("p1").kept == [1], "1 of 6 actions: the same pick is chance (0.167)"
    drop = next(d for d in artifact.drops if d.item == "p2-b1")
    assert "read off the world model" in drop.reason and "goal 1 says the form is late" in drop.reason
    assert "goal 1 says the form is late" in prompt_of(provider, "p2-actions-c2")


def test_the_plan_must_place_every_expected_value_in_a_document(context, small, settings):
    answers = iter([None])

    def plan_without_values(prompt: str) -> str:
        if next(answers, "done") is None:
            return ('<evidence_plan>{"evidence_distribution": [{"document_type": "email", "evidence_role": "who is late", '
                    '"key_information": "the form is late", "sender_or_creator": "%s", "discoverability": "search"}, '
                    '{"document_type": "calendar", "evidence_role": "when it is due", "key_information": "the review", '
                    '"sender_or_creator": "%s", "discoverability": "search"}]}</evidence_plan>') % ((name,) * 2)
        from synthetic import SyntheticProbe
        return SyntheticProbe().plan(prompt, "p1-b1-plan", None)

    out, _ = synthetic_chain(context, small, settings, until="probe_world")
    name = out["probe_world"].of("p1").relationships[0].name
    out, provider = synthetic_chain(context, small, settings, until="probe_plans",
                                    overrides={"p1-b1-plan": plan_without_values})
    reask = next(r for r in provider.requests if r.call_key.endswith("p1-b1-plan/a2")).messages[-1].content
    assert "probe_plans.values_planned" in reask and "CASE-4101 (id, parameter reference)" in reask
    plan = out["probe_plans"].of("p1-b1")
    assert "CASE-4101" in plan.plan[0].key_information


def test_a_sample_whose_kept_evidence_lacks_an_expected_value_is_dropped(context, small, settings):
    not_evidence = '<verdict>{"evidence_of": [], "reason": "about something else"}</verdict>'
    out, _ = synthetic_chain(context, small, settings, until="probe_evidence",
                             overrides={"p2-b1-tp1-c1-judge": not_evidence, "p2-b1-tp1-c2-judge": not_evidence})
    artifact = out["probe_evidence"]
    assert artifact.samples == ["p1-b1", "p2-b2"]
    reason = next(d.reason for d in artifact.drops if d.item == "p2-b1")
    assert "no kept true positive states" in reason and "2026-03-09 (date, parameter due_date)" in reason


def test_a_hard_negative_that_announces_it_needs_nothing_is_regenerated(context, small, settings):
    out, provider = synthetic_chain(context, small, settings, until="probe_evidence")

    def closing(prompt: str) -> str:
        from synthetic import SyntheticProbe
        answer = SyntheticProbe().hard_negative(prompt, "p1-b1-hn1-c1", __import__("random").Random(1))
        return answer.replace("Thanks,", "This is resolved, nothing is needed from you. Thanks,")

    out, provider = synthetic_chain(context, small, settings, until="probe_hard_negatives",
                                    overrides={"p1-b1-hn1-c1": closing})
    reask = next(r for r in provider.requests if r.call_key.endswith("p1-b1-hn1-c1/a2")).messages[-1].content
    assert "probe_hard_negative.no_closure_cue" in reask and "'nothing is needed'" in reask
    assert funnel_of(out["probe_hard_negatives"], "hard_negative")
    kept = out["probe_hard_negatives"].kept(sample_id="p1-b1")
    assert len(kept) == 1 and "nothing is needed" not in kept[0].text


def test_a_distractor_that_conveys_a_bottleneck_is_replaced_by_a_natural_one(context, small, settings):
    out, provider = synthetic_chain(context, small, settings, until="probe_distractors", overrides={
        "p2-b1-email3-c1-judge": '<verdict>{"evidence_of": [1], "reason": "it mentions the late form"}</verdict>'})
    artifact = out["probe_distractors"]
    assert funnel_of(artifact, "distractor")["email"]["retried"] == 1
    assert [d.origin for d in artifact.kept(sample_id="p2-b1")].count("natural") == 1
    asked = prompt_of(provider, "p2-b1-email3-c2")
    assert "evidence of bottleneck(s) 1" in asked and "Write one natural email" in asked
