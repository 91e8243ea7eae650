"""PROBE's scorers: search P/R/F1 without an LLM, T24's score from its details, T25 only for the right action."""

from __future__ import annotations

import pytest

from sopforge.families.probe.asker import Asker
from sopforge.families.probe.models.verdicts import IdentificationVerdict
from sopforge.families.probe.verify.scoring import identification_score, resolution_score, search_scores
from sopforge.llm.gateway import Gateway
from sopforge.llm.providers.scripted import ScriptedProvider
from conftest import pharmacy_world


@pytest.mark.parametrize(("retrieved", "expected"), [
    (["a", "b"], {"precision": 1.0, "recall": 1.0, "f1": 1.0}),
    (["a", "x"], {"precision": 0.5, "recall": 0.5, "f1": 0.5}),
    (["a"], {"precision": 1.0, "recall": 0.5, "f1": 0.6667}),
    (["a", "x", "y", "z"], {"precision": 0.25, "recall": 0.5, "f1": 0.3333}),
    (["a", "a", "b"], {"precision": 1.0, "recall": 1.0, "f1": 1.0}),
    ([], {"precision": 0.0, "recall": 0.0, "f1": 0.0}),
    (["x"], {"precision": 0.0, "recall": 0.0, "f1": 0.0}),
])
def test_search_scores_against_the_true_positives(retrieved, expected):
    assert search_scores(retrieved, ["a", "b"]) == expected


def verdict(judgment: str, essential: str = "correct", deadline: str = "correct", system: str = "correct") -> IdentificationVerdict:
    return IdentificationVerdict.model_validate({
        "judgment": judgment,
        "essential_details_analysis": {"who_blocked": "correct", "who_blocker": essential, "what_task": "correct",
                                       "why_root_cause": "correct"},
        "non_essential_details_analysis": {"when_deadline": deadline, "where_system": system,
                                           "how_mechanism": "n/a", "impact_scope": "correct"}})


@pytest.mark.parametrize(("v", "score"), [
    (verdict("CORRECT"), 1.0),                                  # Example 1 of T24
    (verdict("PARTIALLY_CORRECT", deadline="missing", system="incorrect"), 0.5),  # Example 2
    (verdict("INCORRECT", essential="missing"), 0.0),            # Example 3
    (verdict("CORRECT", essential="incorrect"), 0.0),            # the details decide, not the label
    (verdict("PARTIALLY_CORRECT", deadline="n/a"), 1.0),         # n/a counts as correct
])
def test_identification_score_follows_the_papers_rubric(v, score):
    assert v.score() == score


JUDGE = ('<verdict>{"judgment": "PARTIALLY_CORRECT", "essential_details_analysis": {"who_blocked": "correct", '
         '"who_blocker": "correct", "what_task": "correct", "why_root_cause": "correct"}, '
         '"non_essential_details_analysis": {"when_deadline": "missing", "where_system": "correct", '
         '"how_mechanism": "correct", "impact_scope": "n/a"}, "reasoning": "no deadline"}</verdict>')
PARAMS = ('<verdict>{"judgment": "PARTIALLY_CORRECT", "reasoning": "no ticket", "parameter_analysis": '
          '{"critical_parameters_met": false, "would_resolve_bottleneck": "partially", "missing_parameters": '
          '["prescription_number"], "incorrect_parameters": [], "semantic_matches": ["prescriber_name"]}, '
          '"confidence": 0.8}</verdict>')


def asker_with(responses, settings) -> tuple[Asker, ScriptedProvider]:
    provider = ScriptedProvider(responses)
    gateway = Gateway(provider, ledger=None, settings=settings, sleep=lambda _s: None)
    return Asker("probe_eval", "slug", ("probe/judge_identification",), llm=gateway, settings=settings,
                 model="m", temperature=0.0), provider


def test_identification_is_judged_by_t24_and_stored_with_its_raw_text(settings):
    asker, provider = asker_with([JUDGE], settings)
    world = pharmacy_world()
    answer = identification_score(asker, "p1-b1", world, "Harold's refill is stuck", "Harold Jensen's refill ...")
    assert answer.score == 0.5 and answer.raw_text == JUDGE
    assert answer.verdict["non_essential_details_analysis"]["when_deadline"] == "missing"
    prompt = provider.requests[0].messages[0].content
    assert '"Harold\'s refill is stuck"' in prompt and "Timothy" in prompt and world.org.company_name in prompt


def test_a_wrong_action_scores_zero_without_asking_a_judge(settings):
    asker, provider = asker_with([], settings)
    answer = resolution_score(asker, "p1-b1", pharmacy_world(), "b", [], "call_prescriber_office", {"a": 1},
                              "send_pickup_reminder", {"recipient": "x"})
    assert answer.score == 0.0 and answer.verdict["action_correct"] is False and provider.requests == []


def test_the_right_action_is_scored_by_t25_on_its_parameters(settings):
    asker, provider = asker_with([PARAMS], settings)
    answer = resolution_score(asker, "p1-b1", pharmacy_world(), "the bottleneck", [], "call_prescriber_office",
                              {"prescription_number": "RX-4471203"}, "call_prescriber_office",
                              {"prescriber_name": "Dr. Alan Whitaker"})
    assert answer.score == 0.5 and answer.raw_text == PARAMS
    prompt = provider.requests[0].messages[0].content
    assert '"prescription_number": "RX-4471203"' in prompt and "Lisa Chen" in prompt
