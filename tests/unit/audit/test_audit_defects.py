"""``sopforge audit`` on the §7 example and on folders with exactly one known defect each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sopbench_defects import DEFECTS, REFERENCE, copy_good
from sopforge.audit import audit_folder
from sopforge.cli.audit import audit

app = typer.Typer()
app.command()(audit)
runner = CliRunner()


def run_cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def failed(report_json: dict) -> dict[str, str]:
    return {c["name"]: c["severity"] for c in report_json["checks"] if not c["passed"]}


def test_the_spec_example_audits_clean(good_folder: Path):
    report = audit_folder(good_folder)
    assert report.ok
    assert not report.errors and not report.warnings
    names = {c.name for c in report.checks}
    # the runtime really ran: oracle calls, stub and determinism checks are present and passed
    for name in ("runtime.calls_succeed", "runtime.tool_matches_csv", "runtime.tool_stub", "runtime.deterministic",
                 "toolspecs.rows_validate", "tools.policy"):
        assert name in names
    assert report.stats["num_tasks"] == 4 and report.stats["num_tools"] == 2
    assert report.stats["decision_distribution"] == {"final_decision": {"refer": 2, "approve": 1, "decline": 1}}


def test_the_example_with_its_reference_procedure_agrees_on_every_label(tmp_path: Path):
    report = audit_folder(copy_good(tmp_path, with_reference=True))
    assert report.ok, report.to_text()
    assert report.get("labels.reference_procedure").passed
    assert report.get("labels.reference_runs").passed


def test_the_cli_passes_the_good_folder(good_folder: Path):
    result = run_cli(good_folder)
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_is_flagged_by_name_and_fails_the_cli(defect: str, make_defect):
    folder = make_defect(defect)
    _, check_name, severity = DEFECTS[defect]
    args = [folder, "--json"] + (["--strict"] if severity == "warning" else [])
    result = run_cli(*args)
    report = json.loads(result.stdout)
    assert failed(report).get(check_name) == severity, (check_name, failed(report))
    assert result.exit_code == 1
    assert report["summary"]["ok"] is False


@pytest.mark.parametrize("defect", [d for d, (_, _, sev) in DEFECTS.items() if sev == "warning"])
def test_warning_defects_pass_without_strict(defect: str, make_defect):
    # §9 marks these [warn]: the harness still runs, so the default exit code is 0.
    result = run_cli(make_defect(defect), "--json")
    assert result.exit_code == 0
    assert DEFECTS[defect][1] in failed(json.loads(result.stdout))


def test_code_that_fails_the_policy_is_never_executed(make_defect, tmp_path: Path):
    folder = make_defect("imports_subprocess")
    report = audit_folder(folder)
    assert not (tmp_path / "EXECUTED").exists()
    assert not any(c.name.startswith("runtime.") for c in report.checks)
    assert any(s.name == "runtime" and "never executed" in s.reason for s in report.skipped)
    # the static checks still ran
    assert report.get("toolspecs.rows_validate").passed


def test_contradicting_labels_are_listed_by_task_id(make_defect):
    report = audit_folder(make_defect("label_contradicts_reference"))
    check = report.get("labels.reference_procedure")
    assert check.details["tasks"] == [1]
    assert "task 1 final_decision: reference 'refer', CSV 'approve'" in check.message


def test_a_reference_procedure_can_be_given_for_a_published_folder(make_defect):
    folder = make_defect("none_label")
    report = audit_folder(folder, reference=REFERENCE)
    assert report.get("labels.reference_procedure").details["tasks"] == [2]


def test_the_constant_tool_is_a_stub_and_the_contradicting_tool_is_not(make_defect, tmp_path: Path):
    ignores = audit_folder(make_defect("tool_ignores_data"))
    assert {"runtime.tool_ignores_input", "runtime.tool_matches_csv"} <= ignores.failed_names()
    contradicts = audit_folder(copy_defect(tmp_path / "b", "tool_contradicts_csv"))
    assert "runtime.tool_ignores_input" not in contradicts.failed_names()
    mismatch = contradicts.get("runtime.tool_matches_csv")
    assert mismatch.details["tasks"] == [0, 1, 2, 3]
    assert "getCreditScore.credit_score: 4 row(s), e.g. task 0 returned 752, CSV has '742'" in mismatch.message


def copy_defect(dest: Path, name: str) -> Path:
    dest.mkdir()
    folder = copy_good(dest)
    DEFECTS[name][0](folder)
    return folder


def test_hash_randomisation_is_reported_even_though_the_sandbox_pins_the_seed(make_defect):
    report = audit_folder(make_defect("nondeterministic_hash"))
    assert report.get("runtime.deterministic").passed  # PYTHONHASHSEED=0 in both processes
    assert not report.get("tools.no_hash_builtin").passed


def test_missing_path_is_unusable_input(tmp_path: Path):
    result = run_cli(tmp_path / "nope")
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_file_instead_of_a_folder_is_unusable_input(good_folder: Path):
    assert run_cli(good_folder / "sop.txt").exit_code == 2


def test_text_report_lists_failures_first(make_defect):
    result = run_cli(make_defect("stub_tool"), "--all")
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if "runtime.tool_stub" in line or "files.required" in line]
    assert "FAIL" in lines[0] and "runtime.tool_stub" in lines[0]
    assert "FAILED" in result.output


def test_no_run_only_reads_the_files(make_defect):
    report = audit_folder(make_defect("stub_tool"), run=False)
    assert report.ok
    assert [s.name for s in report.skipped] == ["runtime"]
