"""Shortcut baselines: a prior guess, an early reader and a constant answer, scored like a model."""

from __future__ import annotations

from sopforge.families.maze.models.instances import Extraction
from sopforge.families.maze.verify.baselines import constant_answer, first_turn_answer
from sopforge.families.maze.verify.instance_checks import schema_errors


def test_the_constant_answer_is_schema_valid_and_blind(lrs, hrs):
    for scenario in (lrs, hrs):
        answer = constant_answer(scenario)
        assert not schema_errors(scenario.answer_schema(), answer)
    assert constant_answer(lrs) == {"category": "1", "step": "1.01", "response": "OK", "action": "queue_fill"}
    assert constant_answer(hrs) == {"step": "1", "response": "OK", "action": "moveon"}


def test_a_first_turn_reading_that_determines_the_answer_executes_the_tree(lrs, hrs):
    reading = Extraction(facts={"request_type": "status_inquiry", "order_status": "ready_for_pickup"})
    assert first_turn_answer(lrs, reading) == ({"category": "4", "step": "4.01", "action": "inform_caller",
                                                "response": lrs.option("4.01")[1].script}, "executed")
    answer, how = first_turn_answer(hrs, Extraction(facts={}, replies=["affirm"]))
    assert answer["step"] == "2" and how == "executed"   # what the agent does after the first turn only


def test_an_open_first_turn_guesses_from_the_sop_only(lrs, hrs):
    answer, how = first_turn_answer(lrs, Extraction(facts={"request_type": "transfer_request",
                                                           "medication_class": "non_controlled"}))
    assert answer["step"] == "3.05" and how.startswith("first possible option")   # SOP order, not the set's answers
    answer, how = first_turn_answer(hrs, Extraction(facts={}, replies=["not a kind"]))
    assert answer == constant_answer(hrs) and how.startswith("constant")
