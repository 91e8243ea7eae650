"""``sopforge runs delete`` / ``runs prune`` on real runs, and ``sopforge --version``.

The delete test works on a copy of the session's demo (its first run) with a second run that reuses it.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import duckdb
import pytest

from cli_support import ROOT

pytestmark = pytest.mark.prefect
THEME_FILE = "examples/themes/pharmacy_refills.yaml"  # the demo's
PACKAGES = {"package", "maze_package"}  # a new run writes its own exports; every other stage is reused
TABLES = ("runs", "stage_runs", "artifacts", "artifact_edges", "validations", "dataset_rows", "funnel",
          "llm_calls", "reviews", "review_requests")


def one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.xdist_group("demo")
def test_delete_refuses_to_break_lineage_prune_keeps_what_is_used_and_files_go_too(demo, tmp_path):
    cli = demo.copy_cli(tmp_path / "home")
    first = demo.summary
    second = json.loads(cli("generate", THEME_FILE, "--json").stdout)  # reuses the first
    assert {s["stage"]: s["status"] for s in second["stages"]} == {
        s["stage"]: "generated" if s["stage"] in PACKAGES else "reused" for s in first["stages"]}
    unrecorded = tmp_path / "unrecorded.yaml"
    unrecorded.write_text(f"theme: a theme nobody recorded\nslug: unrecorded\nprovider: replay\n"
                          f"recordings: {ROOT / 'examples/recordings/pharmacy_refills'}\n")
    assert cli("generate", str(unrecorded)).code != 0
    runs = {r["status"]: r["id"] for r in json.loads(cli("runs", "--json").stdout)}
    failed = runs["failed"]

    export = cli.home / "exports" / first["run_id"]
    [dataset_id] = [s["artifact_id"] for s in first["stages"] if s["stage"] == "dataset"]
    dataset = cli.home / "datasets" / f"{dataset_id}.parquet"
    assert export.is_dir() and dataset.is_file()

    refused = one_error_line(cli("runs", "delete", first["run_id"][:6]))
    assert f"run {first['run_id']} cannot be deleted: run {second['run_id']} uses its artifacts" in refused
    assert export.is_dir()

    pruned = json.loads(cli("runs", "prune", "--status", "failed", "--json").stdout)
    assert pruned["runs"] == [failed] and pruned["kept"] == {}

    dry = json.loads(cli("runs", "delete", first["run_id"], second["run_id"], "--dry-run", "--json").stdout)
    artifacts = len(first["stages"]) + len(PACKAGES)  # the first run's, and the second's own packages
    assert dry["rows"]["artifacts"] == artifacts and dry["files"] == [] and export.is_dir()
    deleted = json.loads(cli("runs", "delete", first["run_id"], second["run_id"], "--json").stdout)
    assert sorted(deleted["runs"]) == sorted([first["run_id"], second["run_id"]])
    second_export = cli.home / "exports" / second["run_id"]
    assert {str(export), str(second_export), str(dataset)} <= set(deleted["files"])
    assert not export.exists() and not second_export.exists() and not dataset.exists()
    with duckdb.connect(str(cli.home / "sopforge.duckdb"), read_only=True) as con:
        assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES} == dict.fromkeys(TABLES, 0)
    assert "no run" in cli("runs", "prune", "--status", "failed").stdout

    bad = one_error_line(cli("runs", "prune", "--status", "running"))
    assert "cannot be pruned" in bad


def test_version(cli):
    result = cli("--version")
    assert result.code == 0 and result.stdout.strip() == f"sopforge {version('sopforge')}"
