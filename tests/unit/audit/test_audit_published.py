"""sopforge audit on folders written the way published SOP-Bench domains are (issue 26).

Each finding class has a folder that proves it; the clean folder, written with the same idioms,
must pass with no error and no warning (no false alarm).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from published_defects import (
    CLEAN, copy_clean, parity_condition, random_report_id, reads_outside_in_one_tool, shuffled_problems,
    stub_report, subprocess_in_one_tool,
)
from sopforge.audit import audit_folder
from sopforge.sandbox import SandboxLimits, check_code

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=20)


def test_the_clean_published_folder_passes_with_no_warning():
    report = audit_folder(CLEAN, limits=LIMITS)
    assert report.ok and not report.warnings, report.to_text(show_passed=False)
    # every tool ran on every row, the two whose parameters are not all CSV columns included
    assert report.get("runtime.calls_succeed").message.startswith("all 96 calls")
    note = report.get("tools.policy.deferred")
    assert note.passed and "random.shuffle" in note.message
    assert report.get("runtime.deterministic").passed


def test_the_sandbox_generated_mode_still_refuses_the_published_idioms():
    kinds = {c.name for c in check_code((CLEAN / "tools.py").read_text()) if not c.passed}
    assert {"tools.policy.imports", "tools.policy.randomness", "tools.policy.filesystem"} <= kinds


def test_a_stub_that_needs_parameters_the_csv_lacks_is_found(tmp_path: Path):
    folder = copy_clean(tmp_path)
    stub_report(folder)
    report = audit_folder(folder, limits=LIMITS)
    stub = report.get("runtime.tool_stub")
    assert not stub.passed and stub.details["tools"] == ["generateDiscrepancyReport"], stub.message
    assert not report.ok


def test_a_parity_rule_that_ignores_its_data_is_found(tmp_path: Path):
    folder = copy_clean(tmp_path)
    parity_condition(folder)
    report = audit_folder(folder, limits=LIMITS)
    matches = report.get("runtime.tool_matches_csv")
    assert not matches.passed and matches.details["tools"] == ["assessPackageCondition"], matches.message
    assert matches.details["tasks"]  # the rows that show it
    ignored = report.get("runtime.tool_ignores_param")
    assert "assessPackageCondition.package_image_path" in ignored.details["parameters"], ignored.message


def test_a_random_value_is_an_error_naming_the_tool_and_field(tmp_path: Path):
    folder = copy_clean(tmp_path)
    random_report_id(folder)
    report = audit_folder(folder, limits=LIMITS)
    det = report.get("runtime.deterministic")
    assert not det.passed and det.details["tools"] == ["generateDiscrepancyReport"], det.message
    assert "report_id" in det.message


def test_a_shuffled_list_is_order_only_a_warning_not_an_error(tmp_path: Path):
    folder = copy_clean(tmp_path)
    shuffled_problems(folder)
    report = audit_folder(folder, limits=LIMITS)
    assert report.get("runtime.deterministic").passed, report.get("runtime.deterministic").message
    order = report.get("runtime.order_stable")
    assert order is not None and not order.passed and order.severity == "warning"
    assert order.details["tools"] == ["generateDiscrepancyReport"]
    assert report.ok


def test_a_tool_that_fails_the_policy_is_skipped_alone(tmp_path: Path):
    folder = copy_clean(tmp_path)
    marker = tmp_path / "EXECUTED"
    subprocess_in_one_tool(folder, marker)
    stub_report(folder)  # found although another tool fails the policy
    report = audit_folder(folder, limits=LIMITS)
    assert not marker.exists()
    assert "tools.policy.processes" in {c.name for c in report.errors}
    assert any(s.name == "runtime.calculateQuantityVariance" for s in report.skipped)
    assert report.get("runtime.tool_stub").details["tools"] == ["generateDiscrepancyReport"]
    assert report.get("runtime.calls_succeed").passed


def test_a_tool_stopped_by_the_guard_is_reported_and_the_others_run(tmp_path: Path):
    folder = copy_clean(tmp_path)
    reads_outside_in_one_tool(folder)
    report = audit_folder(folder, limits=LIMITS)
    guard = report.get("runtime.guard")
    assert guard is not None and not guard.passed and guard.details["tools"] == ["generateDiscrepancyReport"]
    assert report.get("runtime.tool_matches_csv").passed
    assert report.get("runtime.calls_succeed").passed


@pytest.mark.parametrize("snippet", [
    "import subprocess", "import os\nos.system('true')", "import socket", "open('x.csv', 'w')",
    "from pathlib import Path\nPath('x').write_text('y')", "import ast\nast.parse('1')",
    "import logging\nlogging.FileHandler('x.log')", "import logging.handlers", "import os\nos.environ.get('HOME')",
])
def test_the_published_mode_still_refuses_what_reaches_beyond_reading(snippet: str):
    assert any(not c.passed for c in check_code(snippet, mode="published")), snippet
