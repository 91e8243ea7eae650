"""Shortcut baselines: a leave-one-out prior, readers of the first or the last turn only, the SOP's first option."""

from __future__ import annotations

from sopforge.families.maze.models.baselines import BaselineReport, BaselineResult, ScenarioBaselines
from sopforge.families.maze.verify.baselines import pooled_means
from sopforge.families.maze.verify.instance_checks import schema_errors
from sopforge.families.maze.verify.shortcuts import first_option_answer, leave_one_out_majority, read_answer


def test_the_first_option_answer_is_schema_valid_and_blind(lrs, hrs):
    for scenario in (lrs, hrs):
        assert not schema_errors(scenario.answer_schema(), first_option_answer(scenario))
    assert first_option_answer(lrs) == {"category": "1", "step": "1.01", "response": lrs.option("1.01")[1].script,
                                        "action": lrs.option("1.01")[1].action}
    assert first_option_answer(hrs)["step"] == "1.1"   # what Step 1's first sub-step does
    reporting = lrs.model_copy(update={"report": ["refills_remaining", "request_type"]})
    assert first_option_answer(reporting)["details"] == {"refills_remaining": 0, "request_type": "refill_request"}
    assert not schema_errors(reporting.answer_schema(), first_option_answer(reporting))


def test_a_reading_that_determines_the_answer_executes_the_tree(lrs, hrs):
    answer, how = read_answer(lrs, {"request_type": "status_inquiry", "order_status": "ready_for_pickup"}, [])
    assert answer["step"] == "4.01" and how == "executed"
    answer, how = read_answer(hrs, {}, ["affirm"])
    assert answer["step"] == "2" and how == "executed"   # what the agent does after that one turn from Step 1


def test_an_open_reading_guesses_from_the_sop_only(lrs, hrs):
    answer, how = read_answer(lrs, {"request_type": "transfer_request", "medication_class": "non_controlled"}, [])
    assert answer["step"] == "3.05" and how.startswith("first possible option")   # SOP order, not the set's answers
    answer, how = read_answer(hrs, {}, ["not a kind"])
    assert answer == first_option_answer(hrs) and how.startswith("first option")


def test_the_majority_guess_never_sees_the_item_it_guesses():
    a, b = {"step": "1"}, {"step": "2"}
    guesses = leave_one_out_majority({"x": a, "y": a, "z": b}, {"step": "0"})
    assert guesses == {"x": a, "y": a, "z": a}            # x and y are guessed from each other: a real majority
    distinct = leave_one_out_majority({"x": a, "z": b}, {"step": "0"})
    assert distinct["x"] == b and distinct["z"] == a     # distinct answers: the prior is always wrong
    assert leave_one_out_majority({"x": a}, {"step": "0"}) == {"x": {"step": "0"}}


def _result(name, scores):
    return BaselineResult(name=name, answers={}, scores=scores, mean=sum(scores.values()) / len(scores),
                          correct=sum(v == 1.0 for v in scores.values()))


def test_the_gate_pools_every_final_answer_of_a_kind():
    low = {"a": 0.2, "b": 0.2, "c": 0.2}
    scenarios = [ScenarioBaselines(scenario="w1", kind="LRS", instances=3, results=[
                     _result("majority", low), _result("first_turn", {"a": 1.0, "b": 0.2, "c": 0.2}),
                     _result("last_turn", low), _result("first_option", low)]),
                 ScenarioBaselines(scenario="w2", kind="LRS", instances=3, results=[
                     _result(n, low) for n in ("majority", "first_turn", "last_turn", "first_option")])]
    pooled = pooled_means(scenarios)
    assert round(pooled["LRS"]["first_turn"], 4) == round((1.0 + 5 * 0.2) / 6, 4) and "HRS" not in pooled
    report = BaselineReport(scenarios=scenarios, pooled=pooled, max_baseline=0.35)
    assert report.too_high() == []
    assert BaselineReport(scenarios=scenarios, pooled=pooled, max_baseline=0.3).too_high() == ["LRS first_turn 0.33"]
