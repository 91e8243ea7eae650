"""Checks on one instance: the written dialogue, the independent reading, uniqueness, the schema."""

from __future__ import annotations

import pytest

from maze_support import recorded
from sopforge.families.maze.models.execution import compile_logic
from sopforge.families.maze.models.instances import (
    Dialogue, Extraction, InstancePlan, UserTurnPlan, parse_dialogue, parse_extraction, render_user_input,
)
from sopforge.families.maze.options import MazeSpec
from sopforge.families.maze.stages.sampling import plan_instances
from sopforge.families.maze.verify.instance_checks import check_dialogue, compare_extraction, verify_instance
from sopforge.parsing import ParseError

OPTIONS = MazeSpec()  # the example theme's maze: section is the defaults


def plan_of(scenario, plan_id: str):
    count = OPTIONS.lrs_instances if scenario.kind == "LRS" else OPTIONS.hrs_instances
    plans = plan_instances(scenario, count, noise=OPTIONS.noise, max_turns=OPTIONS.max_turns, seed=OPTIONS.seed)
    return next(p for p in plans if p.id == plan_id)


def failed(checks) -> dict[str, str]:
    return {c.name: c.message for c in checks if c.blocking}


def test_recorded_dialogues_pass_the_code_checks(lrs, hrs):
    for scenario, ids in ((lrs, ["L1", "L2", "L3", "L4", "L5"]), (hrs, ["H1", "H2", "H3", "H4", "H5"])):
        for plan_id in ids:
            cycle = "c2" if plan_id == "L2" else "c1"
            dialogue = parse_dialogue(recorded("maze_instances", f"dialogue_{plan_id}_{cycle}"))
            assert not failed(check_dialogue(plan_of(scenario, plan_id), dialogue)), plan_id


def test_a_dialogue_with_the_wrong_number_of_user_turns_is_refused(lrs):
    dialogue = parse_dialogue(recorded("maze_instances", "dialogue_L3_c1"))
    dialogue.turns = dialogue.turns[:2]
    assert "write exactly 2 user turns (found 1)" in failed(check_dialogue(plan_of(lrs, "L3"), dialogue))["maze.dialogue.user_turns"]


def test_an_hrs_agent_line_must_be_the_planned_script_word_for_word(hrs):
    dialogue = parse_dialogue(recorded("maze_instances", "dialogue_H3_c1"))
    dialogue.turns[2].text = "Which medicine do you need?"
    assert "agent turn 2" in failed(check_dialogue(plan_of(hrs, "H3"), dialogue))["maze.dialogue.agent_lines"]


def test_calculation_operands_must_be_stated_and_noise_tagged(hrs):
    dialogue = parse_dialogue(recorded("maze_instances", "dialogue_H3_c1"))
    dialogue.turns[3].text = dialogue.turns[3].text.replace("April 10, 2025", "April tenth")
    dialogue.noise = []
    problems = failed(check_dialogue(plan_of(hrs, "H3"), dialogue))
    assert "days_since_last_fill: April 10, 2025" in problems["maze.dialogue.calculation_operands"]
    assert "calculation in user turn 2" in problems["maze.dialogue.noise_tagged"]


def test_unreadable_answers_are_parse_errors():
    with pytest.raises(ParseError, match="speaker"):
        parse_dialogue('<dialogue>{"turns": [{"speaker": "caller", "text": "hi"}]}</dialogue>')
    with pytest.raises(ParseError, match="phenomenon"):
        parse_dialogue('<dialogue>{"turns": [{"speaker": "user", "text": "hi"}], "noise": '
                       '[{"phenomenon": "shouting", "turn": 1}]}</dialogue>')
    with pytest.raises(ParseError, match="facts"):
        parse_extraction('<extraction>{"replies": []}</extraction>')


def test_the_recorded_reading_verifies_the_instance(lrs, hrs):
    for scenario, plan_id in ((lrs, "L5"), (hrs, "H4")):
        extraction = parse_extraction(recorded("maze_instances", f"extract_{plan_id}_c1"))
        verdict = verify_instance(scenario, compile_logic(scenario), plan_of(scenario, plan_id), extraction)
        assert verdict.passed and not verdict.reasons()


def test_a_dialogue_that_contradicts_its_facts_is_caught(lrs):
    plan = plan_of(lrs, "L5")   # a copay question: active coverage, 62 + 7 dollars
    reading = parse_extraction(recorded("maze_instances", "extract_L5_c1"))
    reading.facts["total_copay_usd"] = 81   # what a reader would find if the dialogue said $62 and $19
    verdict = verify_instance(lrs, compile_logic(lrs), plan, reading)
    assert not verdict.passed and not verdict.extraction_matches and not verdict.unique
    assert verdict.mismatches == ["total_copay_usd read as 81, planned 69"]
    # $81 is a high copay: with the medication's class never stated, 5.05 and 5.06 both remain
    assert verdict.uniqueness == "at root depends on facts the input does not state (5.05, 5.06)"


def test_a_reader_who_cannot_tell_the_reply_leaves_the_answer_open(hrs):
    plan = plan_of(hrs, "H4")
    reading = parse_extraction(recorded("maze_instances", "extract_H4_c1"))
    reading.replies[-1] = "small_talk"   # not a reply kind
    verdict = verify_instance(hrs, compile_logic(hrs), plan, reading)
    assert verdict.mismatches == ["user turn 4 read as reply 'small_talk', planned 'unrelated'"]
    assert "user turn 4: at Step 9 depends on facts the input does not state" in verdict.uniqueness


def test_a_reference_answer_outside_the_schema_is_refused(hrs):
    plan = plan_of(hrs, "H3")
    plan.target = {**plan.target, "step": "6.9", "response": ""}
    reading = parse_extraction(recorded("maze_instances", "extract_H3_c1"))
    verdict = verify_instance(hrs, compile_logic(hrs), plan, reading)
    assert not verdict.schema_valid and not verdict.passed
    assert any(e.startswith("step: '6.9' is not one of") for e in verdict.schema_errors)
    assert any(e.startswith("response: ''") for e in verdict.schema_errors)


def test_user_inputs_are_laid_out_in_three_formats():
    dialogue = Dialogue(turns=[{"speaker": "agent", "text": "Hello"}, {"speaker": "user", "text": "Hi there"}])
    assert render_user_input(dialogue, "speaker_tags", "2025-03-04") == "ASSISTANT: Hello\nUSER: Hi there"
    assert render_user_input(dialogue, "timestamped", "2025-03-04").splitlines() == [
        "Agent (2025-03-04 10:02:11): Hello", "Customer (2025-03-04 10:02:15): Hi there"]
    assert render_user_input(dialogue, "json_lines", "2025-03-04").splitlines()[1] == (
        '{"role": "user", "message": "Hi there", "type": "TEXT"}')


def test_extraction_values_are_compared_by_type():
    plan = InstancePlan(id="L9", kind="LRS", facts={"n": 3, "flag": True, "kind": "a_b"}, turns=[UserTurnPlan(index=1)],
                        path=["1", "1.01"], path_kind="1", target={}, input_format="speaker_tags", call_date="2025-01-06")
    assert compare_extraction(plan, Extraction(facts={"n": "3", "flag": "true", "kind": "A_B"})) == []
    assert compare_extraction(plan, Extraction(facts={"n": 4, "flag": 1, "kind": None})) == [
        "n read as 4, planned 3", "flag read as 1, planned True", "kind read as not stated, planned 'a_b'"]
