"""The trajectory scorer on hand-made trajectories: outputs, final state, forbidden writes, order, extra calls.

One task of the pharmacy example's severe-interaction branch: the record is read, the age, licence,
fill history, ratio and alerts are looked up, a pharmacist review is opened and the decision recorded.
"""

from __future__ import annotations

from sopforge.families.sop_tools.models.api_graph import APIDependency, APIGraph, APISpec, InputParameter, OutputParameter
from sopforge.families.sop_tools.models.ground_truth import ExpectedCall, Task
from sopforge.families.sop_tools.models.trajectory import Trajectory, TrajectoryCall, state_entries
from sopforge.families.sop_tools.verify.trajectory import order_constraints, score_agent, score_trajectory

PATH = ["getRecord", "getAlerts", "openReview", "recordDecision"]
REVIEW = {"request_id": "RR-1", "drug_name": "tramadol", "interacting_drug": "sertraline"}
DECISION = {"request_id": "RR-1", "refill_decision": "refer_to_prescriber", "blocking_reason": "severe_interaction"}
STATE = {"pharmacist_reviews": {"RR-1": REVIEW}, "refill_decisions": {"RR-1": DECISION}}
ANSWER = {"refill_decision": "refer_to_prescriber", "blocking_reason": "severe_interaction"}


def api(name: str, *, after: tuple[str, ...] = (), write: str | None = None, kind: str = "data_dependency") -> APISpec:
    return APISpec(
        api_name=name, description="d", purpose="p", sop_steps=["5.1"], effect="write" if write else "read",
        writes_table=write, input_parameters=[InputParameter(name="request_id", data_type="string", source="user_input")],
        output_parameters=[] if write else [OutputParameter(name="x", data_type="string", destination="ui_display")],
        direct_dependencies=[APIDependency(dependent_api=a, dependency_type=kind, dependency_reason="r") for a in after],
        complexity_level="low", business_criticality="low")


GRAPH = APIGraph(apis=[
    api("getRecord"), api("getAlerts", after=("getRecord",)), api("checkCoverage", after=("getRecord",)),
    api("openReview", after=("getAlerts",), write="pharmacist_reviews"),
    api("recordDecision", after=("openReview",), write="refill_decisions", kind="temporal_dependency")])


def task() -> Task:
    return Task(task_id="RR-1", row_index=0, inputs={"request_id": "RR-1"}, hidden={}, expected_outputs=ANSWER,
                expected_calls=[ExpectedCall(tool=t, input={"request_id": "RR-1"}, output={}) for t in PATH],
                expected_path=PATH, expected_state=STATE, order_constraints=order_constraints(PATH, GRAPH))


def trajectory(tools: list[str], state: dict | None, answer: dict | None = None, errors: tuple[str, ...] = ()) -> Trajectory:
    return Trajectory(task_id="RR-1", state_diff=state, answer=ANSWER if answer is None else answer,
                      calls=[TrajectoryCall(tool=t, error="ValueError: x" if t in errors else None) for t in tools])


def test_order_constraints_come_from_the_graph_and_put_reads_before_writes():
    pairs = order_constraints(PATH, GRAPH)
    # Graph ancestry (getRecord -> getAlerts -> openReview -> recordDecision), and every read before every write.
    assert pairs == [["getRecord", "getAlerts"], ["getRecord", "openReview"], ["getRecord", "recordDecision"],
                     ["getAlerts", "openReview"], ["getAlerts", "recordDecision"], ["openReview", "recordDecision"]]
    # Two reads the graph does not order may run in any order: no pair between them.
    assert order_constraints(["getRecord", "checkCoverage", "getAlerts"], GRAPH) == [
        ["getRecord", "checkCoverage"], ["getRecord", "getAlerts"]]


def test_the_reference_trajectory_scores_one_on_everything():
    score = score_trajectory(task(), trajectory(PATH, STATE))
    assert (score.outputs_correct, score.outputs_harness, score.state_correct, score.order_ok, score.success) == (
        True, True, True, True, True)
    assert score.forbidden_writes == score.wrong_writes == score.missing_writes == []
    assert score.unnecessary_calls == score.missing_calls == [] and score.failed_calls == 0


def test_a_write_the_branch_does_not_allow_is_forbidden_even_with_the_right_answer():
    extra = {**STATE, "renewal_requests": {"RR-1": {"request_id": "RR-1"}}}
    score = score_trajectory(task(), trajectory([*PATH[:3], "sendRenewal", PATH[3]], extra))
    assert score.outputs_correct and score.state_correct is False and not score.success
    assert score.forbidden_writes == ["renewal_requests/RR-1"] and score.unnecessary_calls == ["sendRenewal"]


def test_a_record_for_another_case_is_forbidden_and_the_own_one_missing():
    other = {"pharmacist_reviews": {"RR-1": REVIEW}, "refill_decisions": {"RR-2": DECISION}}
    score = score_trajectory(task(), trajectory(PATH, other))
    assert score.forbidden_writes == ["refill_decisions/RR-2"] and score.missing_writes == ["refill_decisions/RR-1"]


def test_a_record_with_another_value_is_a_wrong_write_naming_the_field():
    wrong = {**STATE, "refill_decisions": {"RR-1": {**DECISION, "refill_decision": "deny"}}}
    score = score_trajectory(task(), trajectory(PATH, wrong, {**ANSWER, "refill_decision": "deny"}))
    assert score.wrong_writes == ["refill_decisions/RR-1: refill_decision"] and not score.outputs_correct


def test_a_missing_write_and_the_call_never_made():
    partial = {"refill_decisions": {"RR-1": DECISION}}
    score = score_trajectory(task(), trajectory([PATH[0], PATH[1], PATH[3]], partial))
    assert score.missing_writes == ["pharmacist_reviews/RR-1"] and score.missing_calls == ["openReview"]
    # The decision was recorded without the review the SOP puts before it: also an order violation.
    assert score.order_violations == ["recordDecision before openReview"]


def test_writing_before_reading_is_an_order_violation_and_a_failed_call_does_not_count():
    early = trajectory(["getRecord", "recordDecision", "getAlerts", "openReview"], STATE)
    assert score_trajectory(task(), early).order_violations == [
        "recordDecision before getAlerts", "recordDecision before openReview"]
    failed = trajectory(["getRecord", "getAlerts", "getAlerts", "openReview", "recordDecision"], STATE,
                        errors=("x",))
    score = score_trajectory(task(), failed)
    assert score.order_ok and score.unnecessary_calls == ["getAlerts"]  # the repeat is one call too many
    raised = trajectory(PATH, STATE, errors=("getAlerts",))
    score = score_trajectory(task(), raised)
    assert score.failed_calls == 1 and score.order_violations == ["openReview before getAlerts",
                                                                  "recordDecision before getAlerts"]


def test_outputs_use_sop_bench_matching_strictly_and_leniently():
    score = score_trajectory(task(), trajectory(PATH, STATE, {"refill_decision": "Refer to prescriber",
                                                              "blocking_reason": "severe interaction"}))
    assert score.outputs_correct and score.outputs_harness
    loose = score_trajectory(task(), trajectory(PATH, STATE, {**ANSWER, "refill_decision": "refer"}))
    assert not loose.outputs_correct and loose.outputs_harness  # SOP-Bench's substring leniency
    missing = score_trajectory(task(), trajectory(PATH, STATE, {"refill_decision": "refer_to_prescriber"}))
    assert not missing.outputs_correct and not missing.outputs_harness


def test_tools_without_state_leave_the_final_state_unscored():
    score = score_trajectory(task(), trajectory(PATH, None))
    assert score.state_correct is None and score.success


def test_agent_report_aggregates_and_keeps_the_failing_scores():
    tasks = [task(), task().model_copy(update={"task_id": "RR-2"})]
    runs = [trajectory(PATH, STATE), trajectory([], {}, {}).model_copy(update={"task_id": "RR-2"})]
    report = score_agent("someone", tasks, runs)
    assert (report.outputs, report.final_state, report.order, report.success) == (0.5, 0.5, 1.0, 0.5)
    assert report.mean_calls == 2.0 and [s.task_id for s in report.failing] == ["RR-2"]
    assert report.line() == "someone on 2 tasks: outputs 0.50, final state 0.50, order 1.00, success 0.50"


def test_state_entries_flatten_a_diff():
    assert state_entries(STATE) == {"pharmacist_reviews/RR-1": REVIEW, "refill_decisions/RR-1": DECISION}
    assert state_entries(None) == {} and state_entries({"t": {}}) == {}
