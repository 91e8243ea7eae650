"""Commands that only read answer at once: they import neither Prefect nor pandas nor Great Expectations.

Each of those costs 1-5 s to import on a loaded 2-core machine, more than the whole answer should
take; numpy, networkx, pyarrow and jsonschema (0.1-0.2 s each) belong to the checks and exports,
which a command that prints a stored artifact never runs. The commands run on the shared demo's home
(every family), in a subprocess that reports what it imported.
``audit`` reads the SOP-Bench CSV the way SOP-Bench's harness does, with pandas, so only Prefect and
GX are ruled out there. The seconds themselves are measured by ``benchmarks/orchestration.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_support import ROOT, quiet_env

HEAVY = ("prefect", "pandas", "great_expectations", "scipy", "numpy", "networkx", "pyarrow", "jsonschema")
# Runs the CLI in this interpreter, then prints the top-level packages it imported (as JSON on stderr).
PROBE = """
import importlib, json, os, runpy, sys
if os.environ.get("PROBE_PRELOAD"):
    importlib.import_module(os.environ["PROBE_PRELOAD"])
sys.argv = ["sopforge", *sys.argv[1:]]
try:
    runpy.run_module("sopforge.cli.app", run_name="__main__")
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print("IMPORTED " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
sys.exit(code)
"""


def imported_by(home, *args: str, preload: str = "") -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=quiet_env(SOPFORGE_HOME=str(home), PROBE_PRELOAD=preload))
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("IMPORTED "))
    return set(json.loads(line.removeprefix("IMPORTED ")))


@pytest.mark.xdist_group("demo")
@pytest.mark.parametrize("command", [
    ("runs",), ("runs", "--json"), ("show", "{run}"), ("show", "{run}", "--stage", "sop"),
    ("show", "{run}", "--stage", "dataset", "--json"), ("show", "{run}", "--stage", "maze_instances"),
    ("show", "{run}", "--stage", "maze_hrs"), ("review", "list"), ("--help",),
], ids=" ".join)
def test_a_command_that_only_reads_imports_no_heavy_package(demo, command):
    args = [a.format(run=demo.run_id) for a in command]
    assert imported_by(demo.home, *args) & set(HEAVY) == set()


@pytest.mark.xdist_group("demo")
def test_audit_imports_pandas_to_read_the_csv_but_not_prefect_or_gx(demo):
    folder = demo.home / "exports" / demo.run_id / "pharmacy_refills"
    imported = imported_by(demo.home, "audit", str(folder), "--no-run")
    assert "pandas" in imported  # the check really ran: it read the CSV as SOP-Bench's harness does
    assert imported & {"prefect", "great_expectations", "scipy"} == set()


def test_the_probe_sees_a_heavy_import(tmp_path):
    """A module imported on the way (here before the command runs) is reported: the check can fail."""
    assert "prefect" not in imported_by(tmp_path, "--help")
    assert "prefect" in imported_by(tmp_path, "--help", preload="prefect")
