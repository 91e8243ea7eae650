"""The SOP-Maze scorer on hand-made answers: 1.0 / 0.2 / 0, per instance and per field."""

from __future__ import annotations

import json

from sopforge.families.maze.models.scenario import EXCLUSION_KEYS
from sopforge.families.maze.verify.scorer import FORMAT_CREDIT, parse_answer, score_answer, score_set

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
    "properties": {"step": {"type": "string", "enum": ["1", "1.1", "2"]},
                   "response": {"type": "string", "minLength": 1, "maxLength": 300},
                   "action": {"type": "string", "enum": ["moveon", "hangup"]},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["step", "response", "action"], "additionalProperties": False,
}
TARGET = {"step": "1.1", "response": "Sorry to have troubled you. Goodbye.", "action": "hangup"}


def score(answer, target=TARGET):
    return score_answer(answer, target, SCHEMA, EXCLUSION_KEYS)


def test_a_correct_answer_scores_one_even_in_a_code_fence_with_another_response():
    fenced = '```json\n{"step": "1.1", "response": "Bye now!", "action": "hangup"}\n```'
    result = score(fenced)
    assert result.score == 1.0 and result.valid and result.fields == {"step": 1.0, "action": 1.0}
    assert score('Here is my answer: {"step": "1.1", "response": "x", "action": "hangup"} done').score == 1.0


def test_a_schema_valid_but_wrong_answer_scores_the_format_credit_per_field_too():
    result = score({"step": "2", "response": "Next step", "action": "hangup"})
    assert result.score == FORMAT_CREDIT == 0.2 and result.valid
    assert result.fields == {"step": 0.2, "action": 1.0}
    assert "step: expected '1.1', got '2'" in result.reason


def test_anything_outside_the_schema_scores_zero():
    for answer in ('{"step": "1.9", "response": "x", "action": "hangup"}',          # not in the step enum
                   '{"step": "1.1", "action": "hangup"}',                            # a required key missing
                   '{"step": "1.1", "response": "x", "action": "hangup", "why": 1}',  # an extra key
                   '{"step": "1.1", "response": "", "action": "hangup"}',            # empty response
                   "I would end the call.", ""):                                      # no JSON at all
        result = score(answer)
        assert result.score == 0.0 and not result.valid and result.fields == {"step": 0.0, "action": 0.0}, answer
    assert "outside the schema" in score('{"step": "1.9", "response": "x", "action": "hangup"}').reason


def test_excluded_keys_strings_and_lists_compare_leniently():
    target = {**TARGET, "tags": ["Caller", "Sensitive topic"]}
    answer = {"step": "1.1", "response": "different words", "action": "HANGUP ", "tags": ["Sensitive topic", "Caller"]}
    # the action enum is case-sensitive in the schema, so a valid answer spells it exactly
    assert score({**answer, "action": "hangup"}, target).score == 1.0
    assert score({**answer, "action": "hangup", "tags": ["Caller"]}, target).score == FORMAT_CREDIT
    assert score({**answer, "action": "hangup"}, {**target, "step": " 1.1"}).score == 1.0  # whitespace in a string


def test_parse_answer_finds_the_first_object():
    assert parse_answer('noise {"a": {"b": 1}} {"c": 2}') == {"a": {"b": 1}}
    assert parse_answer("[1, 2]") == [1, 2]
    assert parse_answer("nothing") is None


def test_score_set_reports_the_papers_aggregates():
    records = [
        {"id": "H1", "scenario": "deep", "kind": "HRS", "target": TARGET, "json_schema": SCHEMA,
         "no_required_eval_acc_keys": ["response"]},
        {"id": "H2", "scenario": "deep", "kind": "HRS", "target": {**TARGET, "step": "2", "action": "moveon"},
         "json_schema": SCHEMA, "no_required_eval_acc_keys": ["response"]},
        {"id": "L1", "scenario": "wide", "kind": "LRS", "target": TARGET, "json_schema": SCHEMA,
         "no_required_eval_acc_keys": ["response"]},
    ]
    answers = {"H1": json.dumps(TARGET), "H2": json.dumps(TARGET)}   # H2 wrong, L1 missing
    result = score_set(answers, records)
    assert result.per_scenario == {"deep": 60.0, "wide": 0.0}
    assert result.hrs == 60.0 and result.lrs == 0.0 and result.overall_kind_mean == 30.0
    assert result.overall_instance_weighted == 40.0
    assert result.counts == {"1.0": 1, "0.2": 1, "0": 1}
    assert result.per_field["deep"] == {"step": 60.0, "action": 60.0}
