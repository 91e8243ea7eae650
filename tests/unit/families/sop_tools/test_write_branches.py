"""A write's branch is judged on the values the task's own path computed (issue 19's recorded evaluation).

The demo's rule "record the PDMP review for a Schedule III-V request whose monitoring result is
not_required or current" once demanded the review on a request the SOP ends at its status gate,
because the consequences replay computes every intermediate on every row. These tasks are test data
built by hand, not model answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.ground_truth import Task
from sopforge.families.sop_tools.verify.paths import write_checks
from sopforge.llm.providers._files import read_response

GRAPH = Path(__file__).resolve().parents[4] / "examples" / "recordings" / "pharmacy_refills" / \
    "pharmacy_refills__api_graph__main__a1.response.md"
COMPUTED = ["validity_check_result", "monitoring_check_result", "pdmp_multiple_provider_flag", "mme_limit_exceeded"]


@pytest.fixture(scope="module")
def graph() -> APIGraph:
    return APIGraph.parse(read_response(GRAPH)[1])


def task(task_id: str, calls: list[tuple[str, dict]], decision: str) -> Task:
    return Task.model_validate({
        "task_id": task_id, "row_index": 0, "inputs": {"refill_request_id": task_id, "dea_schedule": "schedule_iv"},
        # What the replay of every read tool found on the row, whether or not the path got there:
        "hidden": {"validity_check_result": "status_not_active", "monitoring_check_result": "not_required",
                   "pdmp_multiple_provider_flag": False, "mme_limit_exceeded": False},
        "expected_outputs": {"refill_decision": decision},
        "expected_calls": [{"tool": t, "input": {}, "output": out} for t, out in calls],
        "expected_path": [t for t, _ in calls]})


STOPPED_AT_STATUS = [("checkPrescriptionValidity", {"validity_check_result": "status_not_active"}),
                     ("recordRefillDecision", {"record_id": "D-1"}), ("notifyPatientOfDenial", {"record_id": "N-1"})]
REACHED_PDMP = [("checkPrescriptionValidity", {"validity_check_result": "passed"}),
                ("checkMonitoringStatus", {"monitoring_check_result": "not_required"}),
                ("evaluateControlledSubstanceLimits", {"pdmp_multiple_provider_flag": False, "mme_limit_exceeded": False}),
                ("recordPdmpReview", {"record_id": "P-1"}), ("recordRefillDecision", {"record_id": "D-2"}),
                ("releaseRefillToFillQueue", {"record_id": "F-1"})]


def test_a_write_is_not_demanded_on_a_path_that_never_computed_its_condition(graph):
    tasks = [task("RFR-1", STOPPED_AT_STATUS, "deny"), task("RFR-2", REACHED_PDMP, "dispense")]
    result = write_checks(tasks, graph, COMPUTED)[0]
    assert result.passed, result.message
    # Judged on every row's replayed values (the old rule), the stopped request "misses" its review.
    old = write_checks(tasks, graph)[0]
    assert not old.passed and "recordPdmpReview is not called on RFR-1" in old.message


def test_a_path_that_computed_its_condition_must_still_write(graph):
    skipped = [c for c in REACHED_PDMP if c[0] != "recordPdmpReview"]
    result = write_checks([task("RFR-3", skipped, "dispense")], graph, COMPUTED)[0]
    assert not result.passed and "recordPdmpReview is not called on RFR-3" in result.message
