"""``write_sopbench_folder``: the folder re-audits clean, reads back unchanged, and is all or nothing."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest

from sopforge.audit import audit_folder
from sopforge.errors import UserError, ValidationFailed
from sopforge.families.sop_tools.export import sopbench
from sopforge.families.sop_tools.export.sopbench import write_sopbench_folder

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "sopbench"
GOOD = FIXTURES / "loan_triage"
REFERENCE = (FIXTURES / "loan_triage_reference.py").read_text()
INPUTS = ["application_id", "applicant_name", "requested_amount"]


def loan_rows() -> list[dict]:
    """The §7 rows as Python values, plus awkward text, a boolean and a date in hidden columns."""
    names = ["Ada Park, Jr.", 'Ben "B" Ortiz', "Cara\nNilsen", "  Dev Rao"]
    base = [("A-0001", 12000, 742, 0.21, "approve"), ("A-0002", 30000, 655, 0.41, "refer"),
            ("A-0003", 8000, 590, 0.30, "decline"), ("A-0004", 45000, 710, 0.44, "refer")]
    rows = []
    for i, ((app_id, amount, score, dti, decision), name) in enumerate(zip(base, names)):
        rows.append({"final_decision": decision, "application_id": app_id, "credit_score": score,
                     "existing_customer": i % 2 == 0, "applicant_name": name, "requested_amount": amount,
                     "applied_on": dt.date(2024, i + 1, 15), "dti_ratio": dti})
    return rows


def export(dest: Path, rows: list[dict] | None = None, **overrides) -> Path:
    kwargs = dict(
        name="loan_triage", domain="finance", description="Triage personal-loan applications",
        sop_text=(GOOD / "sop.txt").read_text(), toolspecs=json.loads((GOOD / "toolspecs.json").read_text()),
        tools_source=(GOOD / "tools.py").read_text(), rows=rows if rows is not None else loan_rows(),
        input_columns=INPUTS, intermediate_columns=["credit_score", "dti_ratio"],
        output_columns=["final_decision"], extra_metadata={"run_id": "run-1"}, reference_source=REFERENCE,
    )
    kwargs.update(overrides)
    return write_sopbench_folder(dest, **kwargs)


def test_the_export_re_audits_clean_including_labels_against_the_reference(tmp_path: Path):
    folder = export(tmp_path)
    assert folder == tmp_path / "loan_triage"
    report = audit_folder(folder)
    assert report.ok and not report.warnings, report.to_text()
    assert report.get("labels.reference_procedure").passed
    saved = json.loads((folder / "audit.json").read_text())
    assert saved["summary"]["ok"] and saved["folder"] == str(folder)


def test_the_csv_reads_back_with_pandas_to_the_same_values_and_types(tmp_path: Path):
    rows = loan_rows()
    frame = pd.read_csv(export(tmp_path, rows) / "test_set_with_outputs.csv")
    assert list(frame.columns) == [*INPUTS, "existing_customer", "applied_on", "credit_score", "dti_ratio",
                                   "final_decision"]
    assert frame["requested_amount"].dtype == "int64" and frame["credit_score"].dtype == "int64"
    assert frame["dti_ratio"].dtype == "float64"
    assert frame["existing_customer"].dtype == bool
    for i, row in enumerate(rows):
        got = frame.iloc[i]
        for col in ("application_id", "applicant_name", "requested_amount", "credit_score", "dti_ratio",
                    "existing_customer", "final_decision"):
            assert got[col] == row[col], (col, got[col], row[col])
        assert got["applied_on"] == row["applied_on"].isoformat()


def test_the_without_outputs_file_and_metadata(tmp_path: Path):
    folder = export(tmp_path)
    without = pd.read_csv(folder / "test_set_without_outputs.csv")
    assert "final_decision" not in without.columns and len(without) == 4
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["name"] == folder.name == "loan_triage"
    assert meta["input_columns"] == INPUTS and meta["output_columns"] == ["final_decision"]
    assert (meta["num_tasks"], meta["num_tools"], meta["run_id"]) == (4, 2, "run-1")
    assert meta["hidden_columns"] == ["existing_customer", "applied_on", "credit_score", "dti_ratio"]
    assert meta["stats"]["decision_distribution"] == {"final_decision": {"refer": 2, "approve": 1, "decline": 1}}


def no_trace(dest: Path) -> bool:
    return not any(dest.iterdir()) if dest.exists() else True


def test_a_failing_audit_leaves_no_folder(tmp_path: Path):
    stub = (GOOD / "tools.py").read_text().replace(
        'return {"credit_score": int(self._row(application_id)["credit_score"])}', "return {}")
    with pytest.raises(ValidationFailed) as info:
        export(tmp_path, tools_source=stub)
    assert "runtime.tool_stub" in {r["name"] for r in info.value.report}
    assert no_trace(tmp_path)


def test_an_audit_check_the_run_waived_lets_the_export_through(tmp_path: Path):
    # The baggage trial: the one-line way out after the export's audit named `--waive CHECK=...`,
    # and the export then failed on the same check (the audit never saw the run's waivers).
    rows = loan_rows()
    rows[1]["final_decision"] = "approve"
    folder = export(tmp_path, rows, waivers={"labels.reference_procedure": "the data's label is the policy's"})
    assert (folder / "test_set_with_outputs.csv").is_file()
    with pytest.raises(ValidationFailed, match="labels.reference_procedure"):  # another check is not waived
        export(tmp_path / "other", rows, waivers={"runtime.tool_stub": "a stub here is fine"})


def test_a_crash_mid_export_leaves_no_folder(tmp_path: Path, monkeypatch):
    calls = []
    real = sopbench._write_csv

    def second_write_fails(path, columns, table):
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError("disk full")
        real(path, columns, table)

    monkeypatch.setattr(sopbench, "_write_csv", second_write_fails)
    with pytest.raises(OSError, match="disk full"):
        export(tmp_path)
    assert no_trace(tmp_path)


def test_labels_contradicting_the_reference_block_the_export(tmp_path: Path):
    rows = loan_rows()
    rows[1]["final_decision"] = "approve"
    with pytest.raises(ValidationFailed, match="labels.reference_procedure"):
        export(tmp_path, rows)
    assert no_trace(tmp_path)


def test_substring_labels_block_our_export_although_the_audit_only_warns(tmp_path: Path):
    rows = loan_rows()
    for row in rows:
        row["final_decision"] = {"approve": "valid", "decline": "invalid"}.get(row["final_decision"], "refer")
    with pytest.raises(ValidationFailed, match="outputs.labels_distinct"):
        export(tmp_path, rows, reference_source=None)
    assert no_trace(tmp_path)


@pytest.mark.parametrize("column, value, message", [
    ("final_decision", None, "decision column 'final_decision' has no label"),
    ("dti_ratio", float("nan"), "NaN cannot be written"),
])
def test_missing_values_are_refused_before_anything_is_written(tmp_path: Path, column, value, message):
    rows = loan_rows()
    rows[2][column] = value
    with pytest.raises(ValidationFailed, match=message):
        export(tmp_path, rows)
    assert no_trace(tmp_path)


def co_applicant_rows(values: list) -> list[dict]:
    """The §7 rows with a conditional input column: a co-applicant's name exists only for joint applications."""
    return [{**row, "co_applicant_name": value} for row, value in zip(loan_rows(), values)]


CO_APPLICANT = {"co_applicant_name": "joint_application = True"}


def test_a_conditional_input_without_value_is_an_empty_cell_the_metadata_and_audit_accept(tmp_path: Path):
    # The permits trial: owner-builder declarations exist only for owner-builders; every upstream
    # check allowed their None and the export refused it, after every LLM call was paid for.
    rows = co_applicant_rows(["Eve Park", None, "Li Wu", None])
    folder = export(tmp_path, rows, input_columns=[*INPUTS, "co_applicant_name"], conditional_columns=CO_APPLICANT)
    frame = pd.read_csv(folder / "test_set_with_outputs.csv")
    assert frame["co_applicant_name"].isna().tolist() == [False, True, False, True]
    assert frame["co_applicant_name"][0] == "Eve Park"
    with (folder / "test_set_with_outputs.csv").open(newline="") as f:  # what tools.py reads: the empty cell
        assert [r["co_applicant_name"] for r in csv.DictReader(f)] == ["Eve Park", "", "Li Wu", ""]
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["conditional_columns"] == CO_APPLICANT
    report = audit_folder(folder)
    assert report.ok and report.get("csv.values_survive_pandas").passed, report.to_text()


def test_an_empty_shown_column_nobody_declared_is_still_flagged_by_the_audit(tmp_path: Path):
    rows = co_applicant_rows(["Eve Park", None, "Li Wu", None])
    folder = export(tmp_path, rows, input_columns=[*INPUTS, "co_applicant_name"], conditional_columns=CO_APPLICANT)
    meta = json.loads((folder / "metadata.json").read_text())
    del meta["conditional_columns"]
    (folder / "metadata.json").write_text(json.dumps(meta))
    result = audit_folder(folder).get("csv.values_survive_pandas")
    assert not result.passed and "reach the agent as 'nan'" in result.message and "conditional_columns" in result.message
    # Declared, a present token pandas reads as missing is still a value lost: only the empty cell means none.
    meta["conditional_columns"] = CO_APPLICANT
    (folder / "metadata.json").write_text(json.dumps(meta))
    csv_path = folder / "test_set_with_outputs.csv"
    csv_path.write_text(csv_path.read_text().replace("Eve Park", "NA"))
    result = audit_folder(folder).get("csv.values_survive_pandas")
    assert not result.passed and "'NA'" in result.message


@pytest.mark.parametrize("value", ["None", "", "NA"])
def test_a_present_value_pandas_reads_as_missing_is_refused_in_a_conditional_column(tmp_path: Path, value):
    rows = co_applicant_rows(["Eve Park", None, value, None])
    with pytest.raises(ValidationFailed, match="co_applicant_name") as info:
        export(tmp_path, rows, input_columns=[*INPUTS, "co_applicant_name"], conditional_columns=CO_APPLICANT,
               audit=False)
    assert "NA tokens" in str(info.value.report)
    assert no_trace(tmp_path)


def test_no_value_in_a_column_the_schema_does_not_mark_conditional_is_refused_with_the_way_out(tmp_path: Path):
    rows = co_applicant_rows(["Eve Park", None, "Li Wu", None])
    with pytest.raises(ValidationFailed) as info:
        export(tmp_path, rows, input_columns=[*INPUTS, "co_applicant_name"])
    message = str(info.value)
    assert "'co_applicant_name' has no value (None) on rows 1, 3" in message and "\n" not in message
    assert "rerun --from dataset" in message and "[present_if" in message
    assert [r["name"] for r in info.value.report] == ["export.cells"]
    assert no_trace(tmp_path)
    # The way out the run's error names, --waive export.cells=..., then writes the empty cells.
    folder = export(tmp_path, rows, input_columns=[*INPUTS, "co_applicant_name"], audit=False,
                    waivers={"export.cells": "the agent may see no co-applicant"})
    assert pd.read_csv(folder / "test_set_with_outputs.csv")["co_applicant_name"].isna().sum() == 2


@pytest.mark.parametrize("column, values, hint", [
    ("application_id", ["0001", "0002", "0003", "0004"], "non-digit prefix"),
    ("final_decision", ["approve", "None", "decline", "refer"], "NA tokens"),
    ("applicant_name", ["true", "false", "True", "FALSE"], "read as booleans"),
])
def test_text_that_pandas_would_retype_is_refused_with_the_column_named(tmp_path: Path, column, values, hint):
    rows = loan_rows()
    for row, value in zip(rows, values):
        row[column] = value
    with pytest.raises(ValidationFailed, match=column) as info:
        export(tmp_path, rows, audit=False)
    assert hint in str(info.value.report)
    assert no_trace(tmp_path)


def test_an_existing_folder_is_kept_unless_overwrite(tmp_path: Path):
    folder = export(tmp_path, audit=False)
    (folder / "marker").write_text("old")
    with pytest.raises(UserError, match="already exists"):
        export(tmp_path, audit=False)
    assert (folder / "marker").exists()
    export(tmp_path, overwrite=True, audit=False, description="second")
    assert not (folder / "marker").exists()
    assert json.loads((folder / "metadata.json").read_text())["description"] == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["loan_triage"]


@pytest.mark.parametrize("overrides, message", [
    ({"name": "Loan-Triage"}, "must match"),
    ({"extra_metadata": {"name": "x"}}, "reserved keys"),
    ({"input_columns": [*INPUTS, "final_decision"]}, "both input and output"),
    ({"output_columns": []}, "non-empty"),
    ({"intermediate_columns": ["credit_score", "risk_band"]}, "absent from the rows"),
])
def test_bad_arguments_are_user_errors(tmp_path: Path, overrides, message):
    with pytest.raises(UserError, match=message):
        export(tmp_path, **overrides)
    assert no_trace(tmp_path)


def test_the_folders_metadata_reports_the_mean_expected_calls_of_the_tasks(tmp_path: Path):
    """It was null inside the folder while the run-level metadata.json said 7.0."""
    calls = [[{"tool": "getCreditScore", "input": {}}, {"tool": "getDebtToIncome", "input": {}}]] * 3 + [[]]
    tasks = [{"task_id": str(i), "expected_calls": c} for i, c in enumerate(calls)]
    folder = export(tmp_path, tasks=tasks, audit=False)
    stats = json.loads((folder / "metadata.json").read_text())["stats"]
    assert stats["mean_expected_calls"] == 1.5
