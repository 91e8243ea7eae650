"""Where bubblewrap cannot set up the boundary, nothing untrusted runs and the user gets one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sopforge.cli.app import app
from sopforge.sandbox import boundary

ROOT = Path(__file__).resolve().parents[3]
EXPORTED = ROOT / "tests" / "fixtures" / "sopbench" / "loan_triage"


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    missing = str(tmp_path / "no-bwrap")
    monkeypatch.setattr(boundary, "BWRAP_PATH", missing)
    return missing


def test_audit_stops_with_one_line_naming_the_fix(tmp_path: Path, no_bwrap: str):
    folder = tmp_path / "loan_triage"
    shutil.copytree(EXPORTED, folder)
    result = CliRunner().invoke(app, ["audit", str(folder)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no-bwrap is missing" in lines[0] and "apt-get install bubblewrap" in lines[0]
    assert "PASSED" not in result.output
    # Reading the files needs no sandbox: --no-run still works.
    assert CliRunner().invoke(app, ["audit", "--no-run", str(folder)]).exit_code == 0


def test_generate_stops_before_any_model_call(tmp_path: Path, no_bwrap: str):
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["generate", str(ROOT / "examples" / "themes" / "pharmacy_refills.yaml"),
                                      "--home", str(home)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "sandbox for untrusted code is unavailable" in lines[0]
    assert not (home / "prefect").exists(), "no Prefect server is started for a run that cannot happen"
