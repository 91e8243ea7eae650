"""The oracle agent replays the computed ground truth through an exported folder and must score 1.00.

The export here is the fixture bundle plus the ground truth written in the SOP-Bench layout
(metadata.json, the CSV with input, hidden and output columns, tasks.jsonl); each bad case edits
that folder in one place and the report must name the task it breaks.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from sopforge.errors import UserError
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import CSV_FILE
from sopforge.families.sop_tools.verify.oracle import (
    METADATA_FILE, TASKS_FILE, harness_match, oracle_check, read_tasks_jsonl, strict_match, write_tasks_jsonl,
)
from sopforge.sandbox import SandboxLimits

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BUNDLE = FIXTURES / "bundle" / "pharmacy"
ANSWERS = FIXTURES / "answers"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)


@pytest.fixture(scope="module")
def ground_truth() -> GroundTruth:
    schema = DataSchema.parse((ANSWERS / "schema.txt").read_text(encoding="utf-8"))
    graph = APIGraph.parse((ANSWERS / "api_graph.txt").read_text(encoding="utf-8"))
    rows = DatasetBatch.parse((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"), schema).rows
    gt, checks = compute_ground_truth(BUNDLE, schema, graph, rows, limits=LIMITS, check_determinism=False)
    assert not [c for c in checks if not c.passed]
    return gt


def export(folder: Path, gt: GroundTruth) -> Path:
    """The SOP-Bench layout an exporter writes from the bundle and the ground truth."""
    folder.mkdir()
    for name in ("tools.py", "toolspecs.json"):
        shutil.copy(BUNDLE / name, folder / name)
    (folder / "sop.txt").write_text("the SOP\n", encoding="utf-8")
    with open(folder / CSV_FILE, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=gt.columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(gt.csv_rows())
    metadata = {"name": "pharmacy", "input_columns": gt.input_columns, "output_columns": gt.output_columns}
    (folder / METADATA_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    write_tasks_jsonl(folder / TASKS_FILE, gt.tasks)
    return folder


def edit_file(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"edit target not found exactly once: {old!r}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_oracle_scores_one_on_the_exported_ground_truth(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    report = oracle_check(folder, ground_truth.tasks, limits=LIMITS)
    assert report.passed, report.summary()
    assert (report.n_tasks, report.completed, report.correct, report.strict_correct) == (14, 14, 14, 14)
    assert (report.ecr, report.tsr, report.strict_tsr, report.c_tsr) == (1.0, 1.0, 1.0, 1.0)
    assert report.tool_calls == report.tool_calls_ok == sum(len(t.expected_calls) for t in ground_truth.tasks)
    assert (report.stateful, report.final_state, report.order) == (True, 1.0, 1.0)
    assert report.failures == [] and report.problems == []
    [result] = report.checks()
    assert result.name == "oracle.tsr" and result.passed
    assert report.summary() == ("oracle on 14 tasks: ECR 1.00, TSR 1.00, strict TSR 1.00, final state 1.00, "
                                "order 1.00")


def test_tasks_are_read_from_tasks_jsonl_when_not_given(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    assert read_tasks_jsonl(folder / TASKS_FILE) == ground_truth.tasks
    assert oracle_check(folder, limits=LIMITS).passed
    (folder / TASKS_FILE).unlink()
    with pytest.raises(UserError, match="no tasks given and no tasks.jsonl"):
        oracle_check(folder, limits=LIMITS)


def test_a_csv_label_that_contradicts_the_tools_fails_that_task(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    # RX-004550 is too early (ratio 0.73, 8 days left): its label must be deny.
    edit_file(folder / CSV_FILE, "0.73,too_early,deny", "0.73,too_early,approve")
    report = oracle_check(folder, limits=LIMITS)
    assert not report.passed and report.ecr == 1.0
    assert (report.correct, report.strict_correct) == (13, 13) and report.tsr == pytest.approx(13 / 14)
    [failure] = report.failures
    assert (failure.task_id, failure.row_index) == ("RX-004550", 2)
    assert failure.reasons == ["answer refill_decision='deny' does not match the CSV label 'approve'"]
    [result] = report.checks()
    assert not result.passed and result.details["failing"] == ["RX-004550"]
    assert "TSR 0.93" in result.message and "RX-004550: answer refill_decision='deny'" in result.message


def test_a_hidden_cell_that_contradicts_the_recorded_tool_result_fails_that_task(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    edit_file(folder / CSV_FILE, "RX-004512,P-41584,maintenance,2024-11-02,2025-04-18,2,24,30,6,0,",
              "RX-004512,P-41584,maintenance,2024-11-02,2025-04-18,2,24,30,6,3,")
    report = oracle_check(folder, limits=LIMITS)
    [failure] = report.failures
    assert failure.task_id == "RX-004512" and report.tsr == pytest.approx(13 / 14)
    assert failure.reasons == ['getInteractionAlerts returned {"interaction_alert_count": 3}, '
                               'recorded {"interaction_alert_count": 0}']


def test_a_tool_that_raises_fails_the_task_and_counts_against_completion(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    edit_file(folder / "tools.py", "        row = self._row(prescription_id)\n"
                                   "        return {\"prescriber_license_active\"",
              "        row = self._row(prescription_id)\n"
              "        if prescription_id == \"RX-004665\":\n"
              "            raise ValueError(\"licensing registry unavailable\")\n"
              "        return {\"prescriber_license_active\"")
    report = oracle_check(folder, limits=LIMITS)
    assert (report.completed, report.correct) == (13, 13) and report.ecr == pytest.approx(13 / 14)
    assert report.tool_calls_ok == report.tool_calls - 1
    [failure] = report.failures
    assert failure.task_id == "RX-004665"
    # The calls after it still run, as an agent's would, without their prerequisite: order violations.
    assert failure.reasons == ["verifyPrescriberLicense raised ValueError: licensing registry unavailable",
                               "order violations: determineBlockingReason before verifyPrescriberLicense; "
                               "recordRefillDecision before verifyPrescriberLicense"]


def test_a_label_matching_only_by_substring_fails_strictly(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    edit_file(folder / CSV_FILE, "0.73,too_early,deny", "0.73,too_early,deny_refill")
    report = oracle_check(folder, limits=LIMITS)
    assert (report.correct, report.strict_correct) == (14, 13) and not report.passed
    assert report.failures[0].reasons == [
        "answer refill_decision='deny' matches the CSV label 'deny_refill' only by substring"]


def test_a_task_whose_inputs_differ_from_its_csv_row_fails(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    tasks = [t.model_copy(deep=True) for t in ground_truth.tasks]
    tasks[0], tasks[1] = tasks[1], tasks[0]
    report = oracle_check(folder, tasks, limits=LIMITS)
    assert [f.task_id for f in report.failures] == ["RX-004519", "RX-004512"]
    assert report.failures[0].reasons[0] == "CSV row 0 inputs differ from the task's: prescription_id, patient_id"


def test_folder_problems_are_reported_not_raised(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    (folder / METADATA_FILE).write_text(json.dumps({"input_columns": ["prescription_id"],
                                                    "output_columns": ["final_decision"]}))
    report = oracle_check(folder, limits=LIMITS)
    assert not report.passed and report.problems == ["output_columns not in the CSV header: final_decision"]


@pytest.mark.parametrize(("predicted", "expected", "loose", "strict"), [
    ("approve", "approve", True, True),
    (" Refer_To-Prescriber ", "refer_to_prescriber", True, True),
    (True, "True", True, True),
    (True, "true", True, True),
    ("deny", "deny_refill", True, False),
    ("approve", "deny", False, False),
    ("", "approve", False, False),
    ("unknown", "", True, False),
])
def test_answer_matching_follows_sop_bench_and_strict_rules(predicted, expected, loose, strict):
    assert harness_match(predicted, expected) is loose
    assert strict_match(predicted, expected) is strict


def test_a_tool_that_records_something_else_fails_the_final_state_not_the_answer(tmp_path, ground_truth):
    folder = export(tmp_path / "pharmacy", ground_truth)
    edit_file(folder / "tools.py", '"blocking_reason": str(blocking_reason).strip()})\n\n    def recordRefillDecision',
              '"blocking_reason": "unspecified"})\n\n    def recordRefillDecision')
    report = oracle_check(folder, limits=LIMITS)
    referred = [t.task_id for t in ground_truth.tasks if t.expected_outputs["refill_decision"] == "refer_to_prescriber"]
    assert report.tsr == 1.0 and report.order == 1.0 and not report.passed
    assert report.state_correct == 14 - len(referred) and [f.task_id for f in report.failures] == referred
    assert report.failures[0].reasons == [
        f"the calls leave another database state than expected (prescriber_referrals/{referred[0]}: blocking_reason)"]
    assert "final state 0.57" in report.summary()
