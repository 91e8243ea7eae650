"""Ground truth by execution: the fixture bundle, and procedures that are wrong in named ways.

Every bad procedure is the fixture's reference_procedure.py with one edit, so each test shows
exactly which defect the checks must catch and how they name it.
"""

from __future__ import annotations

import datetime
import json
import shutil
import time
from pathlib import Path

import pytest

from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import DatasetBatch
from sopforge.families.sop_tools.models.ground_truth import GroundTruth
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import (
    CSV_FILE, PROCEDURE_FILE, TOOLSPECS_FILE, input_columns, write_rows_csv,
)
from sopforge.sandbox import SandboxLimits

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
BUNDLE = FIXTURES / "bundle" / "pharmacy"
ANSWERS = FIXTURES / "answers"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)

# Worked out by hand from the SOP (5.2.2-5.6.2) for the 14 rows of dataset_batch1.
EXPECTED = {
    "RX-004512": ("no_block", "approve"),  # ratio 0.80 is not < 0.80
    "RX-004519": ("no_block", "approve"),  # ratio 0.77 but only 7 days left; self_pay passes
    "RX-004550": ("too_early", "deny"),  # ratio 0.73 and 8 days left
    "RX-004554": ("no_block", "approve"),  # age 365 is not more than 365
    "RX-004573": ("expired_prescription", "refer_to_prescriber"),  # age 366
    "RX-004625": ("no_block", "approve"),  # schedule_iii_v, age 180
    "RX-004636": ("expired_prescription", "refer_to_prescriber"),  # age 181
    "RX-004662": ("no_block", "approve"),  # ratio 0.85 is not < 0.85
    "RX-004665": ("too_early", "deny"),  # ratio 0.83 and 10 days left
    "RX-004709": ("schedule_ii_prohibited", "refer_to_prescriber"),
    "RX-004724": ("no_refills_left", "refer_to_prescriber"),
    "RX-004733": ("inactive_prescriber", "refer_to_prescriber"),
    "RX-004770": ("interaction_review", "refer_to_prescriber"),
    "RX-004792": ("coverage_lapsed", "deny"),
}


@pytest.fixture(scope="module")
def schema() -> DataSchema:
    return DataSchema.parse((ANSWERS / "schema.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def graph() -> APIGraph:
    return APIGraph.parse((ANSWERS / "api_graph.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows(schema: DataSchema) -> list[dict]:
    return DatasetBatch.parse((ANSWERS / "dataset_batch1.txt").read_text(encoding="utf-8"), schema).rows


@pytest.fixture(scope="module")
def fixture_result(schema, graph, rows) -> tuple[GroundTruth, list[CheckResult]]:
    return compute_ground_truth(BUNDLE, schema, graph, rows, limits=LIMITS)


def bundle_with(tmp_path: Path, procedure_edits: list[tuple[str, str]] = (), *, prepend: str = "") -> Path:
    """A copy of the fixture bundle whose procedure has each ``old`` replaced by ``new`` once."""
    folder = tmp_path / "bundle"
    shutil.copytree(BUNDLE, folder)
    path = folder / PROCEDURE_FILE
    source = path.read_text(encoding="utf-8")
    for old, new in procedure_edits:
        assert source.count(old) == 1, f"edit target not found exactly once: {old!r}"
        source = source.replace(old, new)
    path.write_text(prepend + source, encoding="utf-8")
    return folder


def by_name(checks: list[CheckResult]) -> dict[str, CheckResult]:
    return {c.name: c for c in checks}


def failed(checks: list[CheckResult]) -> dict[str, CheckResult]:
    return {c.name: c for c in checks if not c.passed}


# --- the correct bundle ------------------------------------------------------------------------

def test_fixture_bundle_yields_ground_truth_for_every_row(fixture_result, rows):
    gt, checks = fixture_result
    assert failed(checks) == {}
    assert gt.rows_total == 14 and gt.excluded == [] and len(gt.tasks) == 14
    outcomes = {t.task_id: (t.hidden["blocking_reason"], t.expected_outputs["refill_decision"]) for t in gt.tasks}
    assert outcomes == EXPECTED
    assert gt.input_columns == ["prescription_id", "patient_id", "request_date"]
    assert gt.output_columns == ["refill_decision"]
    assert gt.intermediate_columns == ["prescription_age_days", "early_refill_ratio", "blocking_reason"]
    assert "insurance_status" in gt.hidden_columns and "request_date" not in gt.hidden_columns
    assert gt.procedure.source == (BUNDLE / PROCEDURE_FILE).read_text(encoding="utf-8")

    first = gt.tasks[0]
    assert first.inputs == {"prescription_id": "RX-004512", "patient_id": "P-41584", "request_date": "2025-04-18"}
    assert first.hidden["prescription_age_days"] == 167 and first.hidden["early_refill_ratio"] == 0.8
    assert first.hidden["prescriber_license_active"] is True and first.hidden["refills_remaining"] == 2
    assert first.expected_path == [c.tool for c in first.expected_calls] == [
        "getPrescriptionRecord", "calculatePrescriptionAge", "calculateEarlyRefillRatio", "getInteractionAlerts",
        "verifyPrescriberLicense", "checkInsuranceEligibility", "determineBlockingReason", "recordRefillDecision"]
    assert first.expected_calls[1].input == {"prescription_id": "RX-004512",
                                             "prescription_written_date": "2024-11-02", "request_date": "2025-04-18"}
    assert first.expected_calls[1].output == {"prescription_age_days": 167}
    assert first.expected_calls[-2].input["prescriber_license_active"] is True
    assert first.expected_calls[-2].output == {"blocking_reason": "no_block"}
    # The expected state: what the calls leave on a fresh Manager (the decision record only, on approval).
    assert first.expected_state == {"refill_decisions": {"RX-004512": {
        "prescription_id": "RX-004512", "refill_decision": "approve", "blocking_reason": "no_block"}}}
    assert ["getPrescriptionRecord", "recordRefillDecision"] in first.order_constraints
    referred = next(t for t in gt.tasks if t.expected_outputs["refill_decision"] == "refer_to_prescriber")
    assert sorted(referred.expected_state) == ["prescriber_referrals", "refill_decisions"]
    assert ["sendPrescriberReferral", "recordRefillDecision"] in referred.order_constraints
    assert gt.write_tools == ["sendPrescriberReferral", "recordRefillDecision"]
    # The calls were really recorded per row, not shared: each task's calls carry its own id.
    assert all(c.input.get("prescription_id", t.inputs["prescription_id"]) == t.inputs["prescription_id"]
               for t in gt.tasks for c in t.expected_calls)


def test_coverage_table_counts_every_outcome(fixture_result):
    gt, checks = fixture_result
    assert gt.coverage["refill_decision"] == {"approve": 5, "refer_to_prescriber": 6, "deny": 3}
    assert gt.coverage["blocking_reason"]["too_early"] == 2 and sum(gt.coverage["blocking_reason"].values()) == 14
    assert gt.coverage_table_text() == "\n".join([
        "Coverage over 14 tasks (0 of 14 rows excluded)",
        "field            kind          value                   tasks",
        "refill_decision  decision      approve                 5",
        "                               refer_to_prescriber     6",
        "                               deny                    3",
        "blocking_reason  intermediate  no_block                5",
        "                               schedule_ii_prohibited  1",
        "                               expired_prescription    2",
        "                               no_refills_left         1",
        "                               inactive_prescriber     1",
        "                               interaction_review      1",
        "                               too_early               2",
        "                               coverage_lapsed         1",
    ])
    assert by_name(checks)["ground_truth.coverage"].details["table"] == gt.coverage_table_text()


def test_export_rows_hold_every_column_typed_and_as_cells(fixture_result, schema):
    gt, _ = fixture_result
    row = gt.export_rows()[2]
    assert list(row) == schema.names
    assert row["prescription_id"] == "RX-004550" and row["days_supply_remaining"] == 8
    assert row["early_refill_ratio"] == 0.73 and row["refill_decision"] == "deny"
    cells = gt.csv_rows()[2]
    assert cells["prescriber_license_active"] == "True" and cells["early_refill_ratio"] == "0.73"


def test_fixture_csv_is_the_dataset_rows_written_by_the_bundle_writer(tmp_path, schema, rows):
    written = write_rows_csv(tmp_path / CSV_FILE, rows, schema)
    assert written.read_bytes() == (BUNDLE / CSV_FILE).read_bytes()


def test_input_columns_are_the_user_input_existing_fields(schema, graph):
    assert input_columns(schema, graph) == ["prescription_id", "patient_id", "request_date"]


def test_a_missing_csv_is_written_from_the_rows(tmp_path, schema, graph, rows):
    folder = bundle_with(tmp_path)
    (folder / CSV_FILE).unlink()
    gt, checks = compute_ground_truth(folder, schema, graph, rows, limits=LIMITS, check_determinism=False)
    assert failed(checks) == {} and len(gt.tasks) == 14
    assert (folder / CSV_FILE).read_bytes() == (BUNDLE / CSV_FILE).read_bytes()


def test_a_csv_that_does_not_hold_the_rows_is_refused(tmp_path, schema, graph, rows):
    folder = bundle_with(tmp_path)
    csv_text = (folder / CSV_FILE).read_text(encoding="utf-8")
    (folder / CSV_FILE).write_text(csv_text.replace("RX-004550,P-41598,maintenance", "RX-004550,P-41598,acute"))
    gt, checks = compute_ground_truth(folder, schema, graph, rows, limits=LIMITS)
    bad = failed(checks)
    assert list(bad) == ["ground_truth.bundle"] and gt.tasks == []
    message = bad["ground_truth.bundle"].message
    assert "row 3 has medication_class='acute' where the dataset row has 'maintenance'" in message


# --- rows the procedure cannot process -----------------------------------------------------------

RAISE_ON_NO_REFILLS = ('    # 5.2.1 Prescription age.\n',
                       '    if record["refills_remaining"] == 0:\n'
                       '        raise ValueError(f"no refills on record for {prescription_id}")\n'
                       '    # 5.2.1 Prescription age.\n')


def test_rows_where_the_procedure_raises_are_excluded_with_the_exception(tmp_path, schema, graph, rows):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [RAISE_ON_NO_REFILLS]), schema, graph, rows,
                                      limits=LIMITS, check_determinism=False)
    assert [(e.row_id, e.kind) for e in gt.excluded] == [("RX-004709", "exception"), ("RX-004724", "exception")]
    assert gt.excluded[0].reason.startswith("ValueError at line ")
    assert gt.excluded[0].reason.endswith(": no refills on record for RX-004709")
    assert [t.task_id for t in gt.tasks] == [r["prescription_id"] for r in rows if r["refills_remaining"] > 0]
    rows_check = failed(checks)["ground_truth.rows_excluded"]
    assert rows_check.severity == "error" and rows_check.blocking  # 2 of 14 = 14% > 10%
    assert rows_check.message.startswith("2 of 14 rows excluded (14%; more than the 10% allowed): ")
    assert "RX-004709: ValueError at line" in rows_check.message and "RX-004724" in rows_check.message
    assert gt.coverage["blocking_reason"]["no_refills_left"] == 0  # the excluded rows are not counted


def test_an_excluded_share_within_the_threshold_is_only_a_warning(tmp_path, schema, graph, rows):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [RAISE_ON_NO_REFILLS]), schema, graph, rows,
                                      max_excluded_share=0.15, limits=LIMITS, check_determinism=False)
    rows_check = failed(checks)["ground_truth.rows_excluded"]
    assert rows_check.severity == "warning" and not rows_check.blocking
    assert "within the 15% allowed" in rows_check.message and len(gt.excluded) == 2


def test_a_tool_that_raises_is_named_in_the_reason(tmp_path, schema, graph, rows):
    edit = ('{"prescription_id": prescription_id, "patient_id": patient_id})\n\n    # 5.2.1',
            '{"prescription_id": prescription_id,\n'
            '                                        "patient_id": "P-0" if prescription_id == "RX-004625" '
            'else patient_id})\n\n    # 5.2.1')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    [excluded] = gt.excluded
    assert excluded.row_id == "RX-004625" and excluded.kind == "exception"
    assert excluded.reason == ("ValueError: prescription RX-004625 does not belong to patient P-0 (raised by tool "
                               'getPrescriptionRecord called with {"prescription_id": "RX-004625", '
                               '"patient_id": "P-0"})')
    assert failed(checks)["ground_truth.rows_excluded"].severity == "warning"  # 1 of 14


def test_a_caught_tool_error_does_not_keep_the_row(tmp_path, schema, graph, rows):
    edit = ('    coverage = manager.process_tool_call("checkInsuranceEligibility", {"patient_id": patient_id})\n',
            '    try:\n'
            '        manager.process_tool_call("checkInsuranceEligibility", {"patient_id": "P-0"})\n'
            '    except ValueError:\n'
            '        pass\n'
            '    coverage = manager.process_tool_call("checkInsuranceEligibility", {"patient_id": patient_id})\n')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == [] and {e.kind for e in gt.excluded} == {"exception"}
    assert "tool checkInsuranceEligibility raised ValueError: unknown patient_id P-0 and the procedure caught it" \
        in gt.excluded[0].reason
    assert failed(checks)["ground_truth.rows_excluded"].blocking


# --- invalid results -----------------------------------------------------------------------------

def test_an_outcome_outside_the_choices_is_excluded_and_named(tmp_path, schema, graph, rows):
    # Recorded as "deny" (the write tool would refuse "suspend"), answered as "suspend".
    edit = ('        "refill_decision": refill_decision,\n    }',
            '        "refill_decision": "suspend" if blocking_reason == "coverage_lapsed" else refill_decision,\n    }')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    [excluded] = gt.excluded
    assert (excluded.row_id, excluded.kind) == ("RX-004792", "invalid_output")
    assert excluded.reason == "refill_decision='suspend' is not one of approve | refer_to_prescriber | deny"
    outputs = failed(checks)["ground_truth.outputs_valid"]
    assert outputs.blocking and "RX-004792: refill_decision='suspend' is not one of" in outputs.message
    assert "coverage_lapsed" not in [t.hidden["blocking_reason"] for t in gt.tasks]


def test_a_missing_field_is_excluded_and_named(tmp_path, schema, graph, rows):
    edit = ('        "refill_decision": refill_decision,\n    }', '    }')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == [] and len(gt.excluded) == 14
    assert gt.excluded[0].reason == "the returned dict misses the decision field(s) refill_decision"
    assert {"ground_truth.outputs_valid", "ground_truth.rows_excluded", "ground_truth.coverage"} <= set(failed(checks))


def test_an_intermediate_the_branch_did_not_obtain_may_be_left_out(tmp_path, schema, graph, rows):
    """Issue 16: an early exit skips later look-ups, so only the decisions must be returned."""
    edit = ('        "early_refill_ratio": ratio,\n        "blocking_reason"', '        "blocking_reason"')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert failed(checks) == {} and len(gt.tasks) == 14
    assert all(t.hidden["early_refill_ratio"] is not None for t in gt.tasks)  # from the tools, whatever the path


def test_an_intermediate_that_differs_from_the_tool_result_is_caught(tmp_path, schema, graph, rows):
    edit = ('    return {\n        "prescription_age_days": age,\n',
            '    return {\n        "prescription_age_days": age + 1,\n')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == [] and {e.kind for e in gt.excluded} == {"intermediate_mismatch"}
    assert gt.excluded[0].reason == "prescription_age_days=168 but the tools returned 167"
    assert "RX-004512: prescription_age_days=168" in failed(checks)["ground_truth.intermediates_from_tools"].message


def test_a_value_outside_its_range_is_excluded(tmp_path, schema, graph, rows):
    # A tool that is wrong for one row: the ratio comes back as a percentage.
    folder = bundle_with(tmp_path)
    tools = (folder / "tools.py").read_text(encoding="utf-8")
    tools = tools.replace("        ratio = round(elapsed / supply, 2)\n",
                          "        ratio = round(elapsed / supply, 2)\n"
                          "        if prescription_id == \"RX-004733\":\n            ratio = ratio * 100\n")
    (folder / "tools.py").write_text(tools, encoding="utf-8")
    gt, _ = compute_ground_truth(folder, schema, graph, rows, limits=LIMITS, check_determinism=False)
    [excluded] = gt.excluded
    assert (excluded.row_id, excluded.kind) == ("RX-004733", "out_of_range")
    assert excluded.reason == "early_refill_ratio=94.0 is outside its range 0.0 to 12.0"


# --- coverage ------------------------------------------------------------------------------------

NEVER_DENY = ('    elif blocking_reason in DENY:\n        refill_decision = "deny"\n',
              '    elif blocking_reason in DENY:\n        refill_decision = "refer_to_prescriber"\n')


def test_an_outcome_no_task_reaches_is_a_coverage_error(tmp_path, schema, graph, rows):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [NEVER_DENY]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert len(gt.tasks) == 14 and gt.unreached() == ["refill_decision=deny"]
    coverage = failed(checks)["ground_truth.coverage"]
    assert coverage.blocking and coverage.details["unreached"] == ["refill_decision=deny"]
    assert coverage.message.startswith("decision outcomes that no task reaches: refill_decision=deny (tasks per "
                                       "outcome: refill_decision: approve 5, refer_to_prescriber 9, deny 0)")
    assert "deny                    0  <- unreached" in gt.coverage_table_text()
    assert list(failed(checks)) == ["ground_truth.coverage"]


def test_an_unreached_intermediate_value_is_a_warning(tmp_path, schema, graph, rows):
    kept = [r for r in rows if r["prescription_id"] != "RX-004770"]  # the only interaction_review row
    folder = bundle_with(tmp_path)
    write_rows_csv(folder / CSV_FILE, kept, schema)
    gt, checks = compute_ground_truth(folder, schema, graph, kept, limits=LIMITS, check_determinism=False)
    warning = failed(checks)["ground_truth.intermediate_coverage"]
    assert warning.severity == "warning" and warning.details["unreached"] == ["blocking_reason=interaction_review"]
    assert list(failed(checks)) == ["ground_truth.intermediate_coverage"]


# --- tools and calls -----------------------------------------------------------------------------

def test_a_call_to_a_tool_that_does_not_exist_is_named(tmp_path, schema, graph, rows):
    edit = ('    # 5.5.1 Interaction alerts',
            '    manager.process_tool_call("getRefillHistory", {"prescription_id": prescription_id})\n'
            '    # 5.5.1 Interaction alerts')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == [] and "Invalid tool_name: getRefillHistory" in gt.excluded[0].reason
    known = failed(checks)["ground_truth.known_tools"]
    assert known.blocking and known.details["tools"] == ["getRefillHistory"]
    assert known.message.startswith("the procedure calls tools that are not in toolspecs.json: "
                                    "getRefillHistory (14 calls)")


def test_a_tool_missing_from_the_toolspecs_is_named_even_when_the_call_works(tmp_path, schema, graph, rows):
    folder = bundle_with(tmp_path)
    specs = (folder / TOOLSPECS_FILE).read_text(encoding="utf-8")
    data = [s for s in json.loads(specs) if s["toolSpec"]["name"] != "verifyPrescriberLicense"]
    (folder / TOOLSPECS_FILE).write_text(json.dumps(data), encoding="utf-8")
    gt, checks = compute_ground_truth(folder, schema, graph, rows, limits=LIMITS, check_determinism=False)
    assert len(gt.tasks) == 14
    assert list(failed(checks)) == ["ground_truth.known_tools"]
    assert failed(checks)["ground_truth.known_tools"].details["tools"] == ["verifyPrescriberLicense"]


def test_calling_a_tool_method_directly_is_refused(tmp_path, schema, graph, rows):
    edit = ('    license_check = manager.process_tool_call("verifyPrescriberLicense", '
            '{"prescription_id": prescription_id})\n',
            '    license_check = manager.verifyPrescriberLicense(prescription_id=prescription_id)\n')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == []
    assert gt.excluded[0].reason == ("ToolUseError: manager.verifyPrescriberLicense is not available: call tools only "
                                     "as manager.process_tool_call(tool_name, {...})")
    assert "call tools only as manager.process_tool_call" in failed(checks)["ground_truth.rows_excluded"].message


def test_arguments_outside_the_toolspec_are_named(tmp_path, schema, graph, rows):
    edit = ('"verifyPrescriberLicense", {"prescription_id": prescription_id})',
            '"verifyPrescriberLicense", {"prescription_id": prescription_id, "patient_id": patient_id})')
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [edit]), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert gt.tasks == []  # the tool refuses the extra keyword too
    inputs = failed(checks)["ground_truth.call_inputs"]
    assert inputs.message.startswith("tool arguments that do not match the toolSpec: verifyPrescriberLicense: "
                                     "unknown parameter(s) patient_id (first in RX-004512)")


def test_a_call_before_its_prerequisite_breaks_the_call_order(tmp_path, schema, graph, rows):
    moved = ('    alerts = manager.process_tool_call("getInteractionAlerts",\n'
             '                                       {"prescription_id": prescription_id, "patient_id": patient_id})\n')
    source = (BUNDLE / PROCEDURE_FILE).read_text(encoding="utf-8")
    assert source.count(moved) == 1
    edits = [(moved, ""), ("    # 5.1.1 Record matching", moved + "    # 5.1.1 Record matching")]
    gt, checks = compute_ground_truth(bundle_with(tmp_path, edits), schema, graph, rows, limits=LIMITS,
                                      check_determinism=False)
    assert len(gt.tasks) == 14 and gt.tasks[0].expected_calls[0].tool == "getInteractionAlerts"
    order = failed(checks)["ground_truth.call_order"]
    assert order.message.startswith("call sequences that break the API graph's dependencies: getInteractionAlerts "
                                    "called before its prerequisite getPrescriptionRecord (first in RX-004512)")


# --- the procedure's code ------------------------------------------------------------------------

@pytest.mark.parametrize(("prepend", "kind", "fragment"), [
    ("import random\n", "randomness", "import of 'random'"),
    ("import tools\n", "imports", "import of 'tools'"),
    ("import time\n", "clock", "import of 'time'"),
])
def test_a_procedure_outside_the_sandbox_policy_is_not_run(tmp_path, schema, graph, rows, prepend, kind, fragment):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, prepend=prepend), schema, graph, rows, limits=LIMITS)
    bad = failed(checks)
    assert list(bad) == [f"ground_truth.procedure_policy.{kind}"]
    assert bad[f"ground_truth.procedure_policy.{kind}"].message.startswith(f"{PROCEDURE_FILE}: line 1: {fragment}")
    assert "ground_truth.sandbox" not in by_name(checks) and gt.tasks == []


def test_a_procedure_without_run_procedure_is_named(tmp_path, schema, graph, rows):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, [("def run_procedure(manager, case):",
                                                              "def run(manager, case):")]),
                                      schema, graph, rows, limits=LIMITS)
    assert list(failed(checks)) == ["ground_truth.procedure_signature"] and gt.tasks == []


def test_a_procedure_that_fails_at_import_is_a_sandbox_error(tmp_path, schema, graph, rows):
    gt, checks = compute_ground_truth(bundle_with(tmp_path, prepend="THRESHOLD = UNDEFINED_NAME\n"), schema, graph,
                                      rows, limits=LIMITS)
    sandbox = failed(checks)["ground_truth.sandbox"]
    assert sandbox.details["error_kind"] == "load_error"
    assert "importing reference_procedure.py raised NameError at line 1" in sandbox.message
    assert "name 'UNDEFINED_NAME' is not defined" in sandbox.message and gt.tasks == []


# --- determinism ---------------------------------------------------------------------------------

def test_a_procedure_whose_results_depend_on_earlier_cases_is_non_deterministic(tmp_path, schema, graph, rows):
    edits = [("def run_procedure(manager, case):\n",
              "_CASES_SEEN = []\n\n\ndef run_procedure(manager, case):\n    _CASES_SEEN.append(1)\n"),
             ('    if blocking_reason == "no_block":\n',
              '    if blocking_reason == "no_block" and len(_CASES_SEEN) % 2 == 0:\n'
              '        refill_decision = "refer_to_prescriber"\n'
              '    elif blocking_reason == "no_block":\n')]
    gt, checks = compute_ground_truth(bundle_with(tmp_path, edits), schema, graph, rows, limits=LIMITS)
    det = failed(checks)["ground_truth.deterministic"]
    assert det.blocking and det.details["changed"] == 5  # every no_block row flips parity when reversed
    assert det.message.startswith("5 rows changed when re-run in a fresh process with the rows in reverse order: "
                                  "RX-004512: result {")
    assert "'refill_decision': 'approve'} then {" in det.message
    assert list(failed(checks)) == ["ground_truth.deterministic"]


# --- throughput ----------------------------------------------------------------------------------

def synthetic_rows(n: int) -> list[dict]:
    """Deterministic rows spread over every branch of the SOP (ids P-/RX- prefixed, as the schema asks)."""
    classes = ["maintenance", "acute", "schedule_ii", "schedule_iii_v"]
    insurance = ["active", "lapsed", "self_pay", "active", "active"]
    request = datetime.date(2025, 4, 18)
    rows = []
    for i in range(n):
        supply = (30, 60, 90, 10)[i % 4]
        rows.append({
            "prescription_id": f"RX-{100000 + i}", "patient_id": f"P-{200000 + i}",
            "medication_class": classes[(i // 3) % 4],
            "prescription_written_date": (request - datetime.timedelta(days=(i * 37) % 400)).isoformat(),
            "request_date": request.isoformat(), "refills_remaining": (i * 7) % 12,
            "days_since_last_fill": (supply * ((i * 13) % 20 + 60)) // 100, "last_fill_days_supply": supply,
            "days_supply_remaining": (i * 5) % 15, "interaction_alert_count": 1 if i % 17 == 0 else 0,
            "prescriber_license_active": i % 23 != 0, "insurance_status": insurance[(i // 2) % 5],
        })
    return rows


def test_throughput_on_thousands_of_rows(tmp_path, schema, graph, capsys):
    rows = synthetic_rows(2000)
    folder = bundle_with(tmp_path)
    write_rows_csv(folder / CSV_FILE, rows, schema)
    started = time.monotonic()
    gt, checks = compute_ground_truth(folder, schema, graph, rows, limits=LIMITS)
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\nground truth for {len(rows)} rows (two sandbox runs): {elapsed:.2f} s, "
              f"{len(rows) / elapsed:,.0f} rows/s")
    assert failed(checks) == {} and len(gt.tasks) == 2000
    assert min(gt.coverage["refill_decision"].values()) > 0
