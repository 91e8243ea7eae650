"""``sopforge audit`` on hostile *data* (issue 20): a finding and FAILED, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sopforge.audit import audit_folder
from sopforge.audit import run as audit_run

EXPORTED = Path(__file__).resolve().parents[2] / "fixtures" / "sopbench" / "loan_triage"


def nested_toolspecs(folder: Path, levels: int) -> None:
    """Make one parameter's schema nest ``levels`` objects deep (valid JSON, parseable by json)."""
    path = folder / "toolspecs.json"
    specs = json.loads(path.read_text())
    specs[0]["toolSpec"]["inputSchema"]["json"]["properties"]["application_id"] = "__DEEP__"
    deep = '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels
    path.write_text(json.dumps(specs).replace('"__DEEP__"', deep))


def test_a_schema_nested_beyond_the_checks_stack_is_a_finding(tmp_path: Path):
    # 480 levels parse, then jsonschema's own recursion ran out: a RecursionError traceback.
    folder = tmp_path / "loan_triage"
    shutil.copytree(EXPORTED, folder)
    nested_toolspecs(folder, 480)
    report = audit_folder(folder, run=False)
    assert not report.ok
    assert "nests deeper than 64 levels" in report.get("toolspecs.parses").message
    cli = Path(sys.executable).with_name("sopforge")
    done = subprocess.run([str(cli), "audit", "--no-run", str(folder)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 1 and "FAILED" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_check_that_breaks_on_the_data_fails_the_audit_with_one_line(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "loan_triage"
    shutil.copytree(EXPORTED, folder)

    def breaks(_contents):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(audit_run, "check_csv", breaks)
    report = audit_folder(folder, run=False)
    failed = report.get("audit.completes")
    assert failed is not None and not failed.passed and not report.ok
    assert "RecursionError" in failed.message and "\n" not in failed.message
    assert report.get("files.required") is not None  # what ran before the failure is kept
