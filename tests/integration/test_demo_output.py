"""What a new user reads after the demo: check messages that match their verdict, the SOP's steps one
per line in ``show --stage sop``, the theme and families as tags in the Prefect runs list, an export
whose two metadata files agree and whose files share one mode, and a bad command-line option blamed
on the option."""

from __future__ import annotations

import json
import re

import duckdb
import httpx
import pytest

from test_bad_input import assert_one_line_error, run

pytestmark = pytest.mark.prefect
THEME_FILE = "examples/themes/pharmacy_refills.yaml"
# Phrases only a failure says. Each was on a passing check of the demo before issue 15:
# package.tasks_present "no task has a computed ground truth: nothing to export", instructions.depth
# "nesting depth 3 exceeds 4", compliance.balanced "unbalanced twins", compliance.length_parity
# "outside 0.8-1.25", instructions.branches "write at least 2", instructions.outcomes_covered "no action
# names the outcome(s)", compliance.pairs_kept "no compliance pair was kept from 2 dialogue(s)".
# And in the PROBE and SOP-Maze families until their checks got ``ok=`` texts: probe_world.team_size
# "direct_reports (3) cannot exceed team_size (7)", probe_actions.count "expected exactly 6 actions, got 6",
# probe_document.length "has 140 words; write 60-220", probe_bottlenecks.real_names "bottleneck(s) [] name
# nobody", probe_actions.no_bottleneck_keywords "actions must not name ... (T1 rule 5): " (an empty list
# of offenders), maze_package.export_reads_back "instances.jsonl does not read back". A "must" is a
# failure's unless the message goes on to say that it holds (the dataset's "X must be present: holds for
# all 50 rows").
FAILURE_WORDING = re.compile(
    r"nothing to export|no task has|exceeds|unbalanced|outside \d|\bwrite (at least|exactly|\d)|add an action|"
    r"no action names|was kept from|broken by|could not|cannot|can never|never reach|is missing|are missing|"
    r"missing from|\bfailed\b|\bfails\b|\bmust\b(?!.*\bholds for\b)|does not|would not|\bis not\b|\bare not\b|"
    r"\bnot an\b|\bneeds?\b|\bgot\b|\bexpected (exactly )?\d|name nobody|\bgive (no|at least|three)\b|"
    r"longer than|stay within|spread the|plan exactly|use a (role|name)|state these|tag every|fix their|"
    r"remove them|no condition reads|impossible value|too well|forever|\(reasons in drops\)|\[\]|\{\}|:\s*$",
    re.IGNORECASE)


@pytest.mark.xdist_group("demo")
def test_after_the_demo_checks_steps_tags_and_export_read_right(demo, prefect_api):
    run_id = demo.run_id
    assert demo.summary["status"] == "succeeded"

    with duckdb.connect(str(demo.home / "sopforge.duckdb"), read_only=True) as con:
        checks = con.execute("SELECT check_name, passed, message, severity FROM validations").fetchall()
    names = {name for name, _, _, _ in checks}
    assert {"package.tasks_present", "compliance.balanced", "instructions.depth", "dataset.values_survive_csv",
            "schema.values_survive_csv", "ground_truth.values_survive_csv"} <= names
    passing = [(name, message) for name, passed, message, _ in checks if passed]
    # Every error check of every stage passes; the independent answerer's answers leave a warning or
    # two (a maze instance the reader kept misreading is dropped, and counted, not exported).
    failing = [(name, severity) for name, passed, _, severity in checks if not passed]
    assert len(checks) > 150 and all(severity == "warning" for _, severity in failing), failing
    reads_as_failure = [(name, message) for name, message in passing if FAILURE_WORDING.search(message)]
    assert reads_as_failure == []
    assert dict(passing)["package.tasks_present"] == "50 tasks exported"

    shown = demo.cli("show", run_id, "--stage", "sop")
    assert shown.code == 0, shown.stderr
    with duckdb.connect(str(demo.home / "sopforge.duckdb"), read_only=True) as con:
        text = con.execute("SELECT content->>'$.text' FROM artifacts WHERE stage = 'sop'").fetchone()[0]
    procedure = text.split("5. Main Procedure", 1)[1].split("6. Output", 1)[0]
    steps = [line.split()[0] for line in procedure.splitlines() if re.match(r"5(\.\d+)+\s", line)]
    printed = [line.strip().split()[0] for line in shown.stdout.splitlines() if re.match(r"\s*5(\.\d+)+\s", line)]
    # Every step begins a printed line, in order (a wrapped long step may start another line with a
    # step reference, hence a subsequence); joined into one paragraph, almost none would.
    remaining = iter(printed)
    assert len(steps) > 10 and all(step in remaining for step in steps), (steps, printed)

    response = httpx.post(f"{prefect_api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [run_id]}}},
                          timeout=30)
    [flow_run] = response.json()
    assert {"sopforge", "pharmacy_refills", "sop_tools"} <= set(flow_run["tags"])
    # Its task runs carry none: a tagged task run asks the server for a concurrency slot first, which a busy
    # SQLite answers 503 and the client retries 2 s later (sopforge.orchestration.concurrency.untagged).
    task_runs = httpx.post(f"{prefect_api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_run["id"]]}}},
                           timeout=30).json()
    assert len(task_runs) > 20 and not [t["name"] for t in task_runs if t["tags"]]

    export = demo.home / "exports" / run_id
    outer = json.loads((export / "metadata.json").read_text())["stats"]
    inner = json.loads((export / "pharmacy_refills" / "metadata.json").read_text())["stats"]
    assert outer["mean_expected_calls"] == inner["mean_expected_calls"] > 0
    modes = {path.relative_to(export).as_posix(): oct(path.stat().st_mode & 0o777)
             for path in export.rglob("*") if path.is_file()}
    assert {"tasks.jsonl", "tasks.parquet", "metadata.json"} <= modes.keys()
    assert len(set(modes.values())) == 1, modes


def test_a_bad_option_is_blamed_on_the_command_line_not_the_theme_file(tmp_path):
    proc = run(tmp_path / "home", "generate", THEME_FILE, "--rows", "-5")
    assert_one_line_error(proc, "--rows -5", "greater than or equal to 1")
    assert THEME_FILE not in proc.stderr and proc.returncode == 2
