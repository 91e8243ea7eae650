"""Executing SOP trees: the reference answer, its uniqueness, and the HRS walk's semantics."""

from __future__ import annotations

from sopforge.families.maze.models.execution import Turn, compile_logic, run_hrs, run_lrs
from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario

DUE_30_DAY = {"request_type": "refill_request", "medication_class": "non_controlled", "prescription_age_days": 100,
              "refills_remaining": 2, "days_supply": "thirty_day", "days_since_last_fill": 24}


def lrs_run(lrs: LRSScenario, facts: dict):
    logic = compile_logic(lrs)
    return run_lrs(lrs, logic, logic.region_of(facts))


def hrs_run(hrs: HRSScenario, facts: dict, *turns: Turn):
    logic = compile_logic(hrs)
    return run_hrs(hrs, logic, logic.region_of(facts), list(turns))


def test_the_one_option_whose_conditions_hold_is_the_answer(lrs: LRSScenario):
    run = lrs_run(lrs, {**DUE_30_DAY, "insurance_status": "active"})
    assert run.ok and run.answer == {"category": "1", "step": "1.05", "action": "queue_fill",
                                     "response": lrs.option("1.05")[1].script}
    # the boundary is exact: one day less is too early, whatever the coverage
    early = lrs_run(lrs, {**DUE_30_DAY, "days_since_last_fill": 23})
    assert early.answer["step"] == "1.04"


def test_an_answer_that_depends_on_an_unstated_fact_is_not_unique(lrs: LRSScenario):
    run = lrs_run(lrs, DUE_30_DAY)   # coverage unknown: 1.05 or 1.06
    assert not run.ok and run.decisions[0].status == "undetermined"
    assert set(run.decisions[0].candidates) == {"1.05", "1.06"}
    assert "depends on facts the input does not state (1.05, 1.06)" in run.error


def test_two_options_holding_at_once_is_ambiguous(lrs: LRSScenario):
    lrs.option("1.06")[1].when = [w.replace("insurance_status in [inactive, not_on_file]", "refills_remaining >= 1")
                                  for w in lrs.option("1.06")[1].when]
    run = lrs_run(lrs, {**DUE_30_DAY, "insurance_status": "active"})
    assert run.decisions[0].status == "ambiguous" and "several conditions hold (1.05, 1.06)" in run.error


def test_a_goto_to_a_step_with_a_script_answers_that_step(hrs: HRSScenario):
    run = hrs_run(hrs, {}, Turn("affirm"))
    assert run.ok and run.answer == {"step": "2", "response": hrs.step("2").script, "action": "moveon"}
    assert run.agent_lines == [hrs.step("1").script]


def test_steps_without_a_script_are_applied_at_once_to_the_same_turn(hrs: HRSScenario):
    facts = {"medication_class": "schedule_iii_v", "refills_remaining": 1, "days_since_last_fill": 26}
    run = hrs_run(hrs, facts, Turn("affirm"), Turn("gives_details"))
    assert run.answer["step"] == "6" and run.answer["action"] == "moveon"
    assert [t.node for t in run.taken] == ["1.2", "2.1", "3.4", "5.1"]   # the prerequisite checks 3 and 5
    assert run.visited == ["1", "2", "3", "5"]
    early = hrs_run(hrs, {**facts, "days_since_last_fill": 25}, Turn("affirm"), Turn("gives_details"))
    assert early.answer["step"] == "8"


def test_a_prerequisite_on_an_unstated_fact_leaves_the_answer_open(hrs: HRSScenario):
    run = hrs_run(hrs, {"medication_class": "non_controlled", "refills_remaining": 1},
                  Turn("affirm"), Turn("gives_details"))
    assert not run.ok and "user turn 2: at Step 4 depends on facts the input does not state (4.1, 4.2)" == run.error


def test_questions_loop_until_no_more_and_return(hrs: HRSScenario):
    kb = hrs.knowledge_base
    run = hrs_run(hrs, {}, Turn("question", 0), Turn("question", 3), Turn("no_more_questions"))
    assert [t.node for t in run.taken] == ["1.3", "7.1", "7.1", "7.2"]
    assert run.agent_lines == [hrs.step("1").script, kb[0].a, kb[3].a]
    assert run.answer == {"step": "2", "response": hrs.step("2").script, "action": "moveon"}
    stays = hrs_run(hrs, {}, Turn("question", 3))
    assert stays.answer == {"step": "7.1", "response": kb[3].a, "action": "moveon"}


def test_global_rules_take_precedence_at_every_waiting_step(hrs: HRSScenario):
    for turns in ([Turn("sensitive")], [Turn("affirm"), Turn("sensitive")], [Turn("question", 1), Turn("human_request")]):
        run = hrs_run(hrs, {}, *turns)
        assert run.answer["action"] == "hangup" and run.answer["step"] in ("R1", "R2")


def test_an_answer_that_stays_waits_at_the_same_step(hrs: HRSScenario):
    facts = {"medication_class": "non_controlled", "refills_remaining": 3, "days_since_last_fill": 40,
             "delivery_in_zone": False}
    run = hrs_run(hrs, facts, Turn("affirm"), Turn("gives_details"), Turn("choose_delivery"), Turn("choose_pickup"))
    assert [t.node for t in run.taken][-2:] == ["6.3", "6.1"]
    assert run.answer["step"] == "6.1" and run.answer["action"] == "hangup"


def test_nothing_follows_the_end_of_a_call(hrs: HRSScenario):
    run = hrs_run(hrs, {}, Turn("decline"), Turn("affirm"))
    assert run.error == "user turn 2 comes after the call ended"
    assert hrs_run(hrs, {}, Turn("choose_pickup")).error == "user turn 1: at Step 1 no condition holds"
    assert "unknown reply kind 'maybe'" in hrs_run(hrs, {}, Turn("maybe")).error
