"""Compute ground truth by executing the reference procedure over the tools, in the sandbox.

A bundle (docs/bundle.md) holds ``tools.py``, ``toolspecs.json``, ``test_set_with_outputs.csv``
(existing fields) and ``reference_procedure.py``. :func:`compute_ground_truth` runs
``run_procedure(manager, case)`` on every row in one sandbox process, through a small harness
that hands the procedure a manager exposing only ``process_tool_call`` and records every call
with its result. Each row becomes a :class:`Task` or an :class:`ExcludedRow` with its reason;
nothing invalid is kept silently (TELLER S12, L113; teller.md §7 item 13).

A second run in a fresh process, with the rows in reverse order, must reproduce every result and
call sequence: it catches state carried between rows as well as anything that varies between
processes. ``ground_truth.*`` checks report the rest (coverage of every decision outcome, tools
outside the specs, call order against the API graph, intermediates that differ from tool results).

Layout: the bundle's files are written, loaded and checked in
:mod:`sopforge.families.sop_tools.verify.ground_truth_bundle`, the sandboxed harness lives in
:mod:`sopforge.families.sop_tools.verify.ground_truth_harness` and the ``ground_truth.*`` judging in
:mod:`sopforge.families.sop_tools.verify.ground_truth_checks`; their public names are importable from here.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sopforge.errors import UserError
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import find_id_field
from sopforge.families.sop_tools.models.ground_truth import ExcludedRow, GroundTruth, ReferenceProcedure, Task
from sopforge.families.sop_tools.verify.csv_checks import values_check
from sopforge.families.sop_tools.verify.ground_truth_bundle import PROCEDURE_FILE, _bundle_checks, input_columns
from sopforge.families.sop_tools.verify.ground_truth_checks import (
    _call_checks, _coverage, _coverage_checks, _determinism_check, _procedure_checks, _row_checks, _validate,
)
from sopforge.families.sop_tools.verify.ground_truth_harness import HARNESS_FILE, _execute, _row_runs
from sopforge.families.sop_tools.verify.consequences import replay_consequences
from sopforge.families.sop_tools.verify.trajectory import order_constraints
from sopforge.sandbox import SandboxLimits


__all__ = ["MAX_EXCLUDED_SHARE", "cells_that_may_be_empty", "compute_ground_truth"]

MAX_EXCLUDED_SHARE = 0.10


# --------------------------------------------------------------------------------------- entry point

def cells_that_may_be_empty(gt: GroundTruth, schema: DataSchema) -> set[str]:
    """Columns whose ``None`` the exporter writes as the empty cell it means.

    Hidden columns (an intermediate an early exit never computed), and a conditional field
    (``[present_if]``) wherever it is shown, as the dataset check allows: the permits trial's
    owner-builder declaration exists only for owner-builders, and the reference stage failed three
    asks on its empty input cells.
    """
    shown = set(gt.input_columns) | set(gt.output_columns)
    return {c for c in gt.columns if c not in shown} | {f.name for f in schema.fields if f.present_if is not None}


def compute_ground_truth(bundle_folder: Path, schema: DataSchema, api_graph: APIGraph, rows: list[dict[str, Any]],
                         *, max_excluded_share: float = MAX_EXCLUDED_SHARE, limits: SandboxLimits | None = None,
                         check_determinism: bool = True,
                         gates: dict[str, float] | None = None) -> tuple[GroundTruth, list[CheckResult]]:
    """Run the bundle's reference procedure on every row and derive the ground truth.

    Args:
        bundle_folder: Folder with tools.py, toolspecs.json, reference_procedure.py and, optionally,
            test_set_with_outputs.csv (written from ``rows`` when absent; it must hold the rows in order).
        schema: The data schema (roles, types, choices, ranges).
        api_graph: The API graph (input columns, call-order dependencies).
        rows: The dataset rows (existing fields), in order.
        max_excluded_share: Above this share of excluded rows, ``ground_truth.rows_excluded`` is an error.
        limits: Sandbox limits for each run (default ``SandboxLimits()``).
        check_determinism: Re-run in a fresh process with the rows reversed and compare.
        gates: ``min_distinct_paths`` and ``max_baseline_state_success``: check the path coverage and run
            the baseline agents (the reference stage); None skips both (re-runs that only compare tasks).

    Returns:
        The GroundTruth (no tasks when the procedure could not run) and every ``ground_truth.*`` check.

    Raises:
        UserError: ``bundle_folder`` does not exist.
    """
    folder = Path(bundle_folder)
    if not folder.is_dir():
        raise UserError(f"bundle folder {folder} does not exist")
    id_field = find_id_field(schema)
    inputs = input_columns(schema, api_graph)
    hidden = [f.name for f in schema.existing if f.name not in inputs]
    intermediate = [f.name for f in schema.to_be_obtained if not f.decision]
    outputs = [f.name for f in schema.decisions]
    row_ids = [str(r[id_field]) if id_field and r.get(id_field) is not None else f"row-{i + 1}"
               for i, r in enumerate(rows)]
    procedure_path = folder / PROCEDURE_FILE
    source = procedure_path.read_text(encoding="utf-8") if procedure_path.is_file() else ""

    def result(tasks: list[Task], excluded: list[ExcludedRow], **extra: Any) -> GroundTruth:
        return GroundTruth(procedure=ReferenceProcedure(source=source), id_field=id_field, rows_total=len(rows),
                           tasks=tasks, excluded=excluded, coverage=_coverage(tasks, schema),
                           columns=schema.names, input_columns=inputs, hidden_columns=hidden,
                           intermediate_columns=intermediate, output_columns=outputs,
                           write_tools=[a.api_name for a in api_graph.write_apis], state_tables=api_graph.tables(),
                           **extra)

    checks, specs, csv_rows = _bundle_checks(folder, schema, rows)
    if any(c.blocking for c in checks):
        return result([], []), checks
    procedure = _procedure_checks(source)
    checks += procedure
    if any(c.blocking for c in procedure):
        return result([], []), checks

    cases = [{c: row.get(c, "") for c in inputs} for row in csv_rows]  # == csv_cell of the rows (bundle check)
    # The re-run for the determinism check is independent of the first run, so both processes
    # run side by side; the wall time is that of one run where two cores are free.
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = pool.submit(_execute, folder, cases[::-1], limits) if check_determinism else None
        first = _execute(folder, cases, limits)
        second = pending.result() if pending else None
    if not first.ok:
        message = first.error_message.replace(HARNESS_FILE, PROCEDURE_FILE)
        checks.append(check("ground_truth.sandbox", False, f"the procedure could not run on the rows "
                            f"({first.error_kind}): {message}", error_kind=first.error_kind,
                            completed=first.completed, stderr_tail=first.stderr_tail[-2000:]))
        return result([], []), checks
    checks.append(check("ground_truth.sandbox", True, f"ran {len(rows)} rows in one sandbox process "
                        f"({first.wall_seconds:.2f} s)", wall_seconds=first.wall_seconds))
    runs = _row_runs(first)

    tasks: list[Task] = []
    excluded: list[ExcludedRow] = []
    for i, (run, row_id, row) in enumerate(zip(runs, row_ids, rows, strict=True)):
        problem = ("exception", run.error) if not run.ok else _validate(run, schema)
        if problem:
            excluded.append(ExcludedRow(row_id=row_id, row_index=i, kind=problem[0], reason=problem[1]))
            continue
        values = run.result
        path = [c["tool"] for c in run.calls]
        # One validation per task (nested calls included) keeps 10,000 rows cheap.
        tasks.append(Task.model_validate({
            "task_id": row_id, "row_index": i, "inputs": {c: row.get(c) for c in inputs},
            "hidden": {c: row.get(c) for c in hidden},
            "expected_outputs": {c: values[c] for c in outputs},
            "expected_calls": [{"tool": c["tool"], "input": c["input"], "output": c["output"]} for c in run.calls],
            "expected_path": path, "order_constraints": order_constraints(path, api_graph)}))
    consequences = replay_consequences(folder, tasks, rows, schema, api_graph, inputs, gates=gates, limits=limits)
    checks += consequences.checks
    gt = result(consequences.tasks, excluded, paths=consequences.paths, baselines=consequences.baselines,
                gates=gates or {})
    checks += _row_checks(excluded, len(rows), max_excluded_share)
    # Before the hardening stages pay for their calls: tool results become CSV cells too.
    checks.append(values_check("ground_truth.values_survive_csv", gt.export_rows(), gt.columns,
                               fix="return such values from the procedure and the tools in another form",
                               may_be_missing=cells_that_may_be_empty(gt, schema)))
    checks += _call_checks(runs, gt.tasks, row_ids, specs, api_graph)
    checks += _coverage_checks(gt)
    if second is not None:
        checks.append(_determinism_check(second, runs, row_ids))
    return gt, checks
