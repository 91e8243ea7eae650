"""Checks on one instance: the written dialogue, the turn-by-turn reading, uniqueness, subtasks, the schema."""

from __future__ import annotations

import json

import pytest

from maze_support import dialogue_answer, extraction_answer, turn_reading, user_text
from sopforge.families.maze.models.execution import compile_logic
from sopforge.families.maze.models.instances import (
    Dialogue, Extraction, InstancePlan, TurnReading, UserTurnPlan, parse_dialogue, parse_extraction, render_user_input,
)
from sopforge.families.maze.models.instances import PHENOMENA
from sopforge.families.maze.stages.planning import plan_instances
from sopforge.families.maze.verify.instance_checks import check_dialogue, compare_extraction, verify_instance
from sopforge.parsing import ParseError

ONLY = lambda p: {**dict.fromkeys(PHENOMENA, 0.0), p: 1.0}  # noqa: E731


def plan_with(scenario, phenomenon: str | None = None, *, count: int = 5, pick=lambda p: True) -> InstancePlan:
    noise = ONLY(phenomenon) if phenomenon else dict.fromkeys(PHENOMENA, 0.0)
    return next(p for p in plan_instances(scenario, count, noise=noise, max_turns=5, seed=0) if pick(p))


def reading(plan: InstancePlan) -> Extraction:
    return parse_extraction(extraction_answer([turn_reading(plan, t.index) for t in plan.turns]))


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if c.blocking}


def test_a_dialogue_that_states_its_plan_passes_the_code_checks(lrs, hrs):
    for scenario in (lrs, hrs):
        for plan in plan_instances(scenario, 4, noise={p: 0.5 for p in PHENOMENA}, max_turns=5, seed=2):
            assert not failed(check_dialogue(plan, parse_dialogue(dialogue_answer(plan)))), plan.id


def test_a_dialogue_with_the_wrong_number_of_user_turns_is_refused(lrs):
    plan = plan_with(lrs)
    dialogue = parse_dialogue(dialogue_answer(plan))
    dialogue.turns = dialogue.turns[:2]
    assert f"write exactly {len(plan.turns)} user turns (found 1)" in failed(check_dialogue(plan, dialogue))[
        "maze.dialogue.user_turns"]


def test_an_hrs_agent_line_must_be_the_planned_script_word_for_word(hrs):
    plan = plan_with(hrs)
    dialogue = parse_dialogue(dialogue_answer(plan))
    dialogue.turns[2].text = "Which medicine do you need?"
    assert "agent turn 2" in failed(check_dialogue(plan, dialogue))["maze.dialogue.agent_lines"]


def test_calculation_operands_and_planted_numbers_must_be_stated_and_noise_tagged(lrs):
    plan = plan_with(lrs, "calculation", pick=lambda p: bool(p.noise))
    (noise,) = plan.noise
    dialogue = parse_dialogue(dialogue_answer(plan))
    position = 2 * noise.user_turn - 1
    dialogue.turns[position].text = dialogue.turns[position].text.replace(noise.operands[0], "a while ago")
    dialogue.noise = []
    problems = failed(check_dialogue(plan, dialogue))
    assert f"{noise.fact}: {noise.operands[0]}" in problems["maze.dialogue.calculation_operands"]
    assert f"calculation in user turn {noise.user_turn}" in problems["maze.dialogue.noise_tagged"]
    disfluent = plan_with(lrs, "disfluency", pick=lambda p: any(isinstance(n.decoy, int) and not isinstance(n.decoy, bool)
                                                                for n in p.noise))
    (noise,) = disfluent.noise
    quiet = parse_dialogue(dialogue_answer(disfluent, lambda p, i: user_text(p, i).replace(
        f"(background: {noise.decoy})", "(background noise)")))
    assert (f"disfluency decoy {noise.decoy} in user turn {noise.user_turn}"
            in failed(check_dialogue(disfluent, quiet))["maze.dialogue.calculation_operands"])


def test_unreadable_answers_are_parse_errors():
    with pytest.raises(ParseError, match="speaker"):
        parse_dialogue('<dialogue>{"turns": [{"speaker": "caller", "text": "hi"}]}</dialogue>')
    with pytest.raises(ParseError, match="phenomenon"):
        parse_dialogue('<dialogue>{"turns": [{"speaker": "user", "text": "hi"}], "noise": '
                       '[{"phenomenon": "shouting", "turn": 1}]}</dialogue>')
    with pytest.raises(ParseError, match="facts: Extra inputs"):   # the old whole-input form is refused
        parse_extraction('<extraction>{"facts": {}, "replies": []}</extraction>')


def test_a_faithful_turn_by_turn_reading_verifies_the_instance_and_every_subtask(lrs, hrs):
    for scenario in (lrs, hrs):
        for plan in plan_instances(scenario, 5, noise={p: 0.5 for p in PHENOMENA}, max_turns=5, seed=1):
            verdict = verify_instance(scenario, compile_logic(scenario), plan, reading(plan))
            assert verdict.passed and not verdict.reasons(), (plan.id, verdict.reasons())


def test_a_reader_who_finds_a_wrong_value_is_caught_fact_by_fact(lrs):
    plan = plan_with(lrs, pick=lambda p: "refills_remaining" in p.facts)
    found = reading(plan)
    turn = next(r for r in found.turns if "refills_remaining" in r.facts)
    wrong = 7 if plan.facts["refills_remaining"] != 7 else 8
    turn.facts["refills_remaining"] = wrong
    verdict = verify_instance(lrs, compile_logic(lrs), plan, found)
    assert not verdict.passed
    assert f"refills_remaining read as {wrong}, planned {plan.facts['refills_remaining']}" in verdict.mismatches


def test_a_reversal_read_without_its_first_statement_is_caught(lrs):
    plan = plan_with(lrs, "intent_reversal", pick=lambda p: len(p.subtasks) > 1)
    (noise,) = plan.noise
    found = reading(plan)
    found.turns[noise.decoy_turn - 1].facts.pop(noise.fact)   # as if the writer had said the true value only
    verdict = verify_instance(lrs, compile_logic(lrs), plan, found)
    assert not verdict.passed and verdict.unique   # the final answer is right; the noise is not in the text
    assert any(f"after user turn {noise.decoy_turn} {noise.fact} read as not stated" in m for m in verdict.mismatches)
    decoy_subtask = plan.subtasks[-2].turn   # the last turn before the correction: the decoy's answer
    assert [p.split(":")[0] for p in verdict.subtask_problems] == [f"after user turn {decoy_subtask}"]


def test_a_reply_read_differently_in_an_early_turn_breaks_that_subtask(hrs):
    plan = plan_with(hrs, pick=lambda p: len(p.turns) >= 3)
    found = reading(plan)
    other = next(r.name for r in hrs.replies if r.name != plan.turns[0].reply)
    found.turns[0].reply = other
    verdict = verify_instance(hrs, compile_logic(hrs), plan, found)
    assert f"user turn 1 read as reply '{other}', planned '{plan.turns[0].reply}'" in verdict.mismatches
    assert not verdict.passed


def test_a_reference_answer_outside_the_schema_is_refused(hrs):
    plan = plan_with(hrs)
    plan.target = {**plan.target, "step": "6.9", "response": ""}
    verdict = verify_instance(hrs, compile_logic(hrs), plan, reading(plan))
    assert not verdict.schema_valid and not verdict.passed
    assert any(e.startswith("step: '6.9' is not one of") for e in verdict.schema_errors)
    assert any(e.startswith("response: ''") for e in verdict.schema_errors)


def test_user_inputs_are_laid_out_in_three_formats_and_cut_after_a_user_turn():
    dialogue = Dialogue(turns=[{"speaker": "agent", "text": "Hello"}, {"speaker": "user", "text": "Hi there"},
                               {"speaker": "agent", "text": "Yes?"}, {"speaker": "user", "text": "Refill"}])
    assert render_user_input(dialogue.prefix(1), "speaker_tags", "2025-03-04") == "ASSISTANT: Hello\nUSER: Hi there"
    assert render_user_input(dialogue, "timestamped", "2025-03-04").splitlines()[:2] == [
        "Agent (2025-03-04 10:02:11): Hello", "Customer (2025-03-04 10:02:15): Hi there"]
    # a prefix keeps the timestamps of the whole conversation
    assert render_user_input(dialogue, "timestamped", "2025-03-04").startswith(
        render_user_input(dialogue.prefix(1), "timestamped", "2025-03-04"))
    assert render_user_input(dialogue, "json_lines", "2025-03-04").splitlines()[1] == (
        '{"role": "user", "message": "Hi there", "type": "TEXT"}')
    assert [t.text for t in dialogue.last_user_turn().turns] == ["Refill"]


def test_extraction_values_are_compared_by_type_after_folding_the_turns():
    plan = InstancePlan(id="L9", kind="LRS", facts={"n": 3, "flag": True, "kind": "a_b"},
                        turns=[UserTurnPlan(index=1), UserTurnPlan(index=2)], path=["1", "1.01"], path_kind="1",
                        target={}, input_format="speaker_tags", call_date="2025-01-06")
    folded = Extraction(turns=[TurnReading(facts={"n": "9", "flag": "true"}), TurnReading(facts={"n": "3", "kind": "A_B"})])
    assert folded.facts == {"n": "3", "flag": "true", "kind": "A_B"} and folded.state_after(1)["n"] == "9"
    assert compare_extraction(plan, folded) == []
    assert compare_extraction(plan, Extraction(turns=[TurnReading(facts={"n": 4, "flag": 1})])) == [
        "1 user turns read, the input has 2", "n read as 4, planned 3", "flag read as 1, planned True",
        "kind read as not stated, planned 'a_b'"]
    assert json.loads(extraction_answer([{"reply": None, "facts": {}}]).removeprefix("<extraction>")
                      .removesuffix("</extraction>")) == {"turns": [{"reply": None, "facts": {}}]}
