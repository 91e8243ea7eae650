"""SOP-Maze scenarios: parsing, the rendered SOP and schema, and the checks a bad tree fails."""

from __future__ import annotations

import pytest
from jsonschema import Draft7Validator

from maze_support import scenario_answer
from sopforge.checks import blocking_failures
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario, Step, parse_scenario
from sopforge.families.maze.verify.scenario_checks import check_scenario
from sopforge.parsing import ParseError


def failing(scenario) -> dict[str, str]:
    return {c.name: c.message for c in blocking_failures(check_scenario(scenario))}


def option(lrs: LRSScenario, option_id: str):
    return lrs.option(option_id)[1]


# ------------------------------------------------------------------------------------------ parsing

def test_recorded_scenarios_parse_and_pass_every_check(lrs: LRSScenario, hrs: HRSScenario):
    assert not failing(lrs) and not failing(hrs)
    assert len(lrs.categories) == 5 and len(lrs.leaves()) == 47
    assert len(hrs.steps) == 9 and [r.id for r in hrs.rules] == ["R1", "R2"]


@pytest.mark.parametrize("edit, fragment", [
    (lambda a: a.replace("<scenario>", "<scenrio>"), "scenario"),
    (lambda a: a.replace('"days_since_last_fill >= 24"', '"days_since_last_fill is at least 24"', 1), "must read"),
    (lambda a: a.replace('"type": "boolean"', '"type": "bool"', 1), "type"),
    (lambda a: a.replace('"values": [], "minimum": 0, "maximum": 12', '"values": [], "minimum": 20, "maximum": 12', 1),
     "minimum < maximum"),
])
def test_malformed_answers_are_parse_errors_naming_the_problem(lrs_answer: str, edit, fragment: str):
    with pytest.raises(ParseError, match=fragment):
        parse_scenario(edit(lrs_answer), "LRS")


# ------------------------------------------------------------------------------------------ rendering

def test_the_schema_enums_are_exactly_the_sop_indices(lrs: LRSScenario, hrs: HRSScenario):
    for scenario in (lrs, hrs):
        schema = scenario.answer_schema()
        Draft7Validator.check_schema(schema)
        assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
        assert schema["additionalProperties"] is False and schema["required"] == list(schema["properties"])
    assert lrs.answer_schema()["properties"]["step"]["enum"] == [o.id for _, o in lrs.leaves()]
    assert lrs.answer_schema()["properties"]["action"]["enum"] == lrs.actions
    steps = hrs.answer_schema()["properties"]["step"]["enum"]
    assert {"1", "1.1", "6.3", "9", "9.4", "R1", "R2"} <= set(steps) and len(steps) == len(set(steps))
    assert hrs.answer_schema()["properties"]["action"]["enum"] == ["moveon", "hangup"]


def test_the_hrs_sop_reads_like_the_papers_sample(hrs: HRSScenario):
    text = hrs.sop_text()
    assert "Step 1. Greet the caller and confirm who is calling\nSuggested script: \u201cHello" in text
    assert "- Step 1.2 If the reply is \u201caffirm\u201d, proceed to Step 2." in text
    assert "- Step 7.2 If the reply is \u201cno_more_questions\u201d, return to Step 2." in text
    assert "- Step 4.1 If `days_since_last_fill` is at least 24, proceed to Step 6." in text
    assert "answer from the Q&A knowledge base and stay at Step 7" in text
    assert "# Global rules (they take precedence over every step)\n- Rule R1" in text
    assert "Q: Do you deliver on weekends?" in text


def test_the_lrs_sop_lists_every_option_with_its_conditions(lrs: LRSScenario):
    text = lrs.sop_text()
    assert "## Category 1. Routine refill requests\nApplies when: `request_type` is \u201crefill_request\u201d." in text
    assert ("- 1.06 Non-controlled 30-day supply, due, coverage problem. When: `medication_class` is \u201cnon_controlled\u201d "
            "and `prescription_age_days` is at most 365") in text
    assert "`insurance_status` is one of \u201cinactive\u201d, \u201cnot_on_file\u201d. Action: billing_review." in text


# ------------------------------------------------------------------------------------------ bad trees

def test_an_option_its_sibling_always_covers_is_unreachable(lrs: LRSScenario):
    option(lrs, "1.06").when = [w.replace("insurance_status in [inactive, not_on_file]", "insurance_status != inactive")
                                for w in option(lrs, "1.06").when]
    problems = failing(lrs)
    assert list(problems) == ["maze.lrs.reachable"]
    assert "1.05: whenever it holds, so does 1.06" in problems["maze.lrs.reachable"]


def test_an_option_with_contradictory_conditions_is_unreachable(lrs: LRSScenario):
    option(lrs, "4.01").when = ["order_status == ready_for_pickup", "hours_waiting > 30", "hours_waiting < 10"]
    assert "4.01: its conditions contradict each other" in failing(lrs)["maze.lrs.reachable"]


def test_conditions_must_read_known_facts_with_possible_values(lrs: LRSScenario):
    option(lrs, "5.03").when = ["insurance_status == expired", "copay <= 25", "medication_class < 3"]
    message = failing(lrs)["maze.conditions_well_typed"]
    assert "'expired' is not a possible value of insurance_status" in message
    assert "unknown fact 'copay'" in message and "cannot be compared with <" in message


def test_a_narrow_tree_is_not_an_lrs(lrs: LRSScenario):
    lrs.categories = lrs.categories[3:]
    message = failing(lrs)["maze.lrs.shape"]
    assert "2 categories (at least 4)" in message and "14 options in all" in message
    assert "no category has more than 10 options" in message


def test_a_tree_without_a_computed_fact_requires_no_calculation(lrs: LRSScenario):
    for fact in lrs.facts:
        fact.derivation = None
    assert "no condition reads a computed fact" in failing(lrs)["maze.calculation_fact"]


def test_a_cycle_without_exit_is_refused(hrs: HRSScenario):
    # Step 9's only ways out now lead back to Step 6 or stay, and Step 6 can only go to 9 or stay
    step6, step9 = hrs.step("6"), hrs.step("9")
    step6.branches = [b for b in step6.branches if b.then != "end"]
    step9.branches = [b for b in step9.branches if b.then != "end"]
    hrs.rules = [r for r in hrs.rules if r.then != "end"]
    message = failing(hrs)["maze.hrs.exits"]
    assert "steps 6, 9 can never reach an ending: a cycle without exit" in message


def test_a_loop_that_never_waits_for_the_user_is_refused(hrs: HRSScenario):
    hrs.step("5").branches[1].target = "4"   # 4 -> 8 ... now 5 -> 4 and 4 -> 5 without a script
    hrs.step("4").branches[1].target = "5"
    assert "steps 4 -> 5 -> 4 form a loop that never waits for the user" in failing(hrs)["maze.hrs.no_silent_loop"]


def test_an_unreachable_step_and_sub_step_are_named(hrs: HRSScenario):
    hrs.step("3").branches = [b for b in hrs.step("3").branches if b.id != "3.4"]   # nothing leads to Step 5 now
    message = failing(hrs)["maze.hrs.reachable"]
    assert "steps ['5'], sub-steps and rules ['5.1', '5.2']" in message


def test_steps_must_be_wired(hrs: HRSScenario):
    hrs.step("2").branches[0].target = "12"
    hrs.step("8").branches[0].script = None
    message = failing(hrs)["maze.hrs.wiring"]
    assert "2.1 goes to unknown step '12'" in message and "8.1 ends the call without a script" in message


def test_a_shallow_procedure_is_not_an_hrs(hrs: HRSScenario):
    hrs.steps = [hrs.step("1"), Step(id="2", title="Close", script="Anything else?", branches=[
        b.model_copy(update={"id": b.id.replace("1.", "2.")}) for b in hrs.step("1").branches
        if b.then == "end"] + [hrs.step("1").branches[1].model_copy(update={"id": "2.9", "target": "1"})])]
    hrs.step("1").branches = [b if b.then != "goto" else b.model_copy(update={"target": "2"})
                              for b in hrs.step("1").branches]
    message = failing(hrs)["maze.hrs.shape"]
    assert "2 steps (at least 6)" in message and "no prerequisite step" in message and "no jump" in message


def test_an_edited_scenario_round_trips_through_an_answer(hrs: HRSScenario):
    again = parse_scenario(scenario_answer(hrs), "HRS", hrs.task_type)
    assert again == hrs
