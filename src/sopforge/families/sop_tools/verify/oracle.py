"""The oracle agent: replays the ground truth through an exported folder and must score 1.00.

An exported folder has the SOP-Bench layout (research/sopbench_format.md §1): ``metadata.json``
(``input_columns``, ``output_columns``), ``test_set_with_outputs.csv`` (inputs, hidden columns,
answers), ``tools.py`` and ``toolspecs.json``. The oracle knows each task's expected call
sequence: it replays those calls, in order, through the folder's ``tools.py`` in a sandbox
process, on shared Managers as the SOP-Bench harness does (each task's state diff is what the
reference actions leave for its case, as on a fresh environment in τ²-bench), then answers with
the expected outputs.

A task succeeds when every call returns without raising and returns exactly what was recorded
during ground-truth computation, the call names a tool of ``toolspecs.json``, the answer matches
every CSV output column, both under SOP-Bench's matcher (lower-case, trim, ``_``/``-`` as spaces,
substring either way, null-likes equal) and strictly (equal after that normalisation), and the
trajectory scorer (:mod:`sopforge.families.sop_tools.verify.trajectory`) finds the database the
calls leave equal to the task's expected state and no order violation. This proves the exported
CSV, tools and ground truth agree (docs/bundle.md, "Oracle check"; teller.md §7 item 14;
sopbench_format.md §9 item 8).

Where the tasks come from (our decision): the caller passes them, or they are read from
``tasks.jsonl`` inside the folder (one :class:`Task` JSON per line, in CSV row order). SOP-Bench
ignores extra files, so the exporter may ship it; without either, the expected call sequences
are unknown and :func:`oracle_check` refuses to guess. Task i is CSV row i (SOP-Bench's task id
is the 0-based row position); its ``inputs`` must equal that row's input columns.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from sopforge.errors import UserError
from sopforge.families.sop_tools.models.ground_truth import OracleFailure, OracleReport, Task, csv_cell
from sopforge.families.sop_tools.verify.ground_truth_bundle import (
    CSV_FILE, TOOLS_FILE, TOOLSPECS_FILE, load_toolspecs,
)
from sopforge.families.sop_tools.verify.ground_truth_checks import json_equal
from sopforge.families.sop_tools.verify.replay import literal_plan, pooled, replay_plans, to_trajectory
from sopforge.families.sop_tools.verify.trajectory import (
    NULL_LIKE, harness_match, normalize_answer, score_trajectory, strict_match,
)
from sopforge.sandbox import SandboxLimits

__all__ = ["METADATA_FILE", "NULL_LIKE", "TASKS_FILE", "harness_match", "normalize_answer", "oracle_check",
           "read_tasks_jsonl", "strict_match", "write_tasks_jsonl"]

METADATA_FILE = "metadata.json"
TASKS_FILE = "tasks.jsonl"


def write_tasks_jsonl(path: Path, tasks: list[Task]) -> Path:
    """Write one Task JSON per line (the oracle's input next to an exported folder)."""
    with open(path, "w", encoding="utf-8") as handle:
        for task in tasks:
            handle.write(task.model_dump_json() + "\n")
    return Path(path)


def read_tasks_jsonl(path: Path) -> list[Task]:
    """Read the tasks written by :func:`write_tasks_jsonl` (blank lines ignored)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [Task.model_validate_json(line) for line in lines if line.strip()]


def _load_folder(folder: Path) -> tuple[dict[str, Any], list[dict[str, str]], set[str], list[str]]:
    problems = []
    metadata: dict[str, Any] = {}
    rows: list[dict[str, str]] = []
    tools: set[str] = set()
    for name in (METADATA_FILE, CSV_FILE, TOOLS_FILE, TOOLSPECS_FILE):
        if not (folder / name).is_file():
            problems.append(f"{name} is missing")
    if problems:
        return metadata, rows, tools, problems
    try:
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        tools = set(load_toolspecs(folder / TOOLSPECS_FILE))
    except (ValueError, OSError) as exc:
        return metadata, rows, tools, [f"cannot read the folder: {exc}"]
    with open(folder / CSV_FILE, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        header = reader.fieldnames or []
    for key in ("input_columns", "output_columns"):
        columns = metadata.get(key)
        if not isinstance(columns, list) or not columns:
            problems.append(f"{METADATA_FILE} needs a non-empty list {key}")
        elif absent := [c for c in columns if c not in header]:
            problems.append(f"{key} not in the CSV header: {', '.join(absent)}")
    return metadata, rows, tools, problems


def oracle_check(folder: Path, tasks: list[Task] | None = None, *, limits: SandboxLimits | None = None) -> OracleReport:
    """Replay every task's expected calls through the folder's tools and score the oracle's answers.

    Args:
        folder: An exported folder in the SOP-Bench layout.
        tasks: The tasks, in CSV row order; None reads ``<folder>/tasks.jsonl``.
        limits: Sandbox limits for the replay process.

    Returns:
        The report: ECR, TSR (SOP-Bench matcher), strict TSR, failing tasks with reasons.

    Raises:
        UserError: The folder does not exist, or no tasks were given and there is no tasks.jsonl.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"oracle folder {folder} does not exist")
    if tasks is None:
        if not (folder / TASKS_FILE).is_file():
            raise UserError(f"no tasks given and no {TASKS_FILE} in {folder}: the oracle needs each task's "
                            "expected call sequence")
        tasks = read_tasks_jsonl(folder / TASKS_FILE)
    metadata, rows, tool_names, problems = _load_folder(folder)
    n = max(len(rows), len(tasks))
    if problems:
        return OracleReport(folder=str(folder), n_tasks=n, completed=0, correct=0, strict_correct=0, tool_calls=0,
                            tool_calls_ok=0, problems=problems)
    if len(rows) != len(tasks):
        problems.append(f"{CSV_FILE} has {len(rows)} rows but there are {len(tasks)} tasks")

    plans = [literal_plan([c.model_dump() for c in t.expected_calls]) for t in tasks]
    replay, runs = replay_plans(folder, plans, fresh=pooled("oracle", len(plans)), limits=limits)
    if not replay.ok:
        problems.append(f"replaying the calls failed ({replay.error_kind}): {replay.error_message}")

    completed = correct = strict_correct = calls = calls_ok = state_correct = order_correct = 0
    stateful = any(r.stateful for r in runs)
    failures = []
    inputs, outputs = metadata["input_columns"], metadata["output_columns"]
    for i in range(n):
        task = tasks[i] if i < len(tasks) else None
        row = rows[i] if i < len(rows) else None
        task_id = task.task_id if task else f"csv row {i}"
        if task is None or row is None:
            reason = "no task for this CSV row" if task is None else "no CSV row for this task"
            failures.append(OracleFailure(task_id=task_id, row_index=i, reasons=[reason]))
            continue
        reasons = []
        differ = [c for c in inputs if row.get(c) != csv_cell(task.inputs.get(c))]
        if differ:
            reasons.append(f"CSV row {i} inputs differ from the task's: {', '.join(differ)}")
        run = runs[i] if i < len(runs) else None
        if run is None or not run.ok:
            reasons.append("the calls were not replayed (sandbox failure)" if run is None
                           else f"the replay failed: {run.error}")
        else:
            calls += len(run.calls)
            for expected, outcome in zip(task.expected_calls, run.calls, strict=True):
                if expected.tool not in tool_names:
                    reasons.append(f"{expected.tool} is not in {TOOLSPECS_FILE} (the harness would reject the call)")
                if "error" in outcome:
                    reasons.append(f"{expected.tool} raised {outcome['error']}")
                    continue
                calls_ok += 1
                if "unencodable" in outcome:
                    reasons.append(f"{expected.tool} returned a value that is not JSON-encodable "
                                   f"({outcome['unencodable']})")
                elif not json_equal(outcome.get("output"), expected.output):
                    reasons.append(f"{expected.tool} returned {json.dumps(outcome.get('output'))}, recorded "
                                   f"{json.dumps(expected.output)}")
            if all("error" not in o for o in run.calls):
                completed += 1
        # TSR judges the calls and the answers (SOP-Bench); final state and order are scored beside it.
        loose = strict = not reasons
        if run is not None and run.ok:
            score = score_trajectory(task, to_trajectory(task.task_id, run, dict(task.expected_outputs)))
            if score.state_correct is False:
                shown = (score.forbidden_writes + score.wrong_writes + score.missing_writes)[:3]
                reasons.append(f"the calls leave another database state than expected ({'; '.join(shown)})")
            state_correct += score.state_correct is not False
            if score.order_violations:
                reasons.append(f"order violations: {'; '.join(score.order_violations[:3])}")
            order_correct += score.order_ok
        for column in outputs:
            if column not in task.expected_outputs:
                reasons.append(f"the task has no expected value for output column {column}")
                loose = strict = False
                continue
            answer, label = task.expected_outputs[column], row.get(column, "")
            if not harness_match(answer, label):
                loose = False
                reasons.append(f"answer {column}={csv_cell(answer)!r} does not match the CSV label {label!r}")
            elif not strict_match(answer, label):
                reasons.append(f"answer {column}={csv_cell(answer)!r} matches the CSV label {label!r} "
                               "only by substring")
            strict = strict and strict_match(answer, label)
        correct += loose
        strict_correct += strict
        if reasons:
            failures.append(OracleFailure(task_id=task_id, row_index=i, reasons=reasons))
    return OracleReport(folder=str(folder), n_tasks=n, completed=completed, correct=correct,
                        strict_correct=strict_correct, tool_calls=calls, tool_calls_ok=calls_ok, problems=problems,
                        failures=failures, stateful=stateful, state_correct=state_correct, order_correct=order_correct)
