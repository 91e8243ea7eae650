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
"""

from __future__ import annotations

import ast
import csv
import datetime
import json
import math
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.errors import UserError
from sopforge.schemas.api_graph import APIGraph
from sopforge.schemas.checks import CheckResult, check
from sopforge.schemas.data_schema import DataSchema, FieldSpec
from sopforge.schemas.dataset import find_id_field
from sopforge.schemas.ground_truth import (
    ExcludedKind, ExcludedRow, GroundTruth, ReferenceProcedure, Task, csv_cell,
)
from sopforge.validation.sandbox import DEFAULT_ALLOWED, SandboxLimits, SandboxResult, check_code, run_in_sandbox

__all__ = [
    "CSV_FILE", "HARNESS_FILE", "MAX_EXCLUDED_SHARE", "PROCEDURE_FILE", "TOOLS_FILE", "TOOLSPECS_FILE",
    "compute_ground_truth", "input_columns", "json_equal", "load_toolspecs", "write_bundle", "write_rows_csv",
]

TOOLS_FILE = "tools.py"
TOOLSPECS_FILE = "toolspecs.json"
PROCEDURE_FILE = "reference_procedure.py"
CSV_FILE = "test_set_with_outputs.csv"
HARNESS_FILE = "_sopforge_reference_harness.py"
PROCEDURE_FUNCTION = "run_procedure"
MAX_EXCLUDED_SHARE = 0.10
MAX_QUOTED = 5

# Runs inside the sandbox next to the bundle. The procedure gets a manager with nothing but
# process_tool_call; arguments and results pass through JSON, so the tools see exactly what a
# replaying agent will send and the record cannot be changed by later mutation.
HARNESS_SOURCE = '''\
"""sopforge harness: run reference_procedure.run_procedure on one case, recording every tool call."""
import json

import reference_procedure


class ToolUseError(Exception):
    """The procedure used the manager in a way the benchmark's agents cannot."""


_SCALARS = (str, int, float, bool, type(None))


def _plain(value, what):
    """A copy made only of JSON values, as json.loads(json.dumps(value)) would give, but fast."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict and all(type(k) is str for k in value):
        return {k: _plain(v, what) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_plain(v, what) for v in value]
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ToolUseError(f"{what} must hold only JSON values (str, int, float, bool, None, lists, dicts): {exc}")


class _RecordingManager:
    def __init__(self, tools, log):
        self._tools = tools
        self._log = log

    def process_tool_call(self, tool_name, tool_input):
        if not isinstance(tool_input, dict):
            raise ToolUseError(f"process_tool_call({tool_name!r}, ...) needs a dict of arguments, "
                               f"got {type(tool_input).__name__}")
        arguments = _plain(tool_input, f"the arguments of {tool_name}")
        entry = {"tool": tool_name, "input": arguments, "output": None, "error": None}
        self._log.append(entry)
        try:
            value = self._tools.process_tool_call(tool_name, _plain(arguments, "arguments"))
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise
        entry["output"] = _plain(value, f"the result of tool {tool_name}")
        return _plain(value, f"the result of tool {tool_name}")

    def __getattr__(self, name):
        raise ToolUseError(f"manager.{name} is not available: call tools only as "
                           f"manager.process_tool_call(tool_name, {{...}})")


def run_case(tools, case):
    log = []
    result = reference_procedure.run_procedure(_RecordingManager(tools, log), dict(case))
    return {"result": result, "calls": log}
'''


# --------------------------------------------------------------------------------------- bundle files

def input_columns(schema: DataSchema, graph: APIGraph) -> list[str]:
    """Existing fields that some API takes with ``source: user_input``, in schema order (docs/bundle.md).

    Args:
        schema: The data schema.
        graph: The API graph.

    Returns:
        The input column names shown to the agent.
    """
    wanted = {p.name for a in graph.apis for p in a.input_parameters if p.source == "user_input"}
    return [f.name for f in schema.existing if f.name in wanted]


def load_toolspecs(path: Path) -> dict[str, dict[str, Any]]:
    """Read ``toolspecs.json``: tool name -> its ``inputSchema.json`` (wrapped or flat elements).

    Raises:
        ValueError: Not JSON, not an array, or an element without a name.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("toolspecs.json must be a JSON array")
    specs: dict[str, dict[str, Any]] = {}
    for i, element in enumerate(data):
        spec = element.get("toolSpec", element) if isinstance(element, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ValueError(f"toolspecs.json element {i} has no toolSpec name")
        schema = spec.get("inputSchema", {}).get("json", {}) if isinstance(spec.get("inputSchema"), dict) else {}
        specs[spec["name"]] = schema if isinstance(schema, dict) else {}
    return specs


def write_rows_csv(path: Path, rows: list[dict[str, Any]], schema: DataSchema) -> Path:
    """Write the existing fields of ``rows`` as ``test_set_with_outputs.csv`` (cells by :func:`csv_cell`)."""
    names = [f.name for f in schema.existing]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([csv_cell(row.get(n)) for n in names])
    return Path(path)


def write_bundle(folder: Path, *, tool_code: str, toolspecs: list[dict[str, Any]], procedure_source: str,
                 rows: list[dict[str, Any]], schema: DataSchema) -> Path:
    """Write a bundle folder (docs/bundle.md) from its parts.

    Args:
        folder: Target folder, created if missing.
        tool_code: Source of tools.py.
        toolspecs: The toolSpec array (flat toolSpec objects are wrapped as ``{"toolSpec": ...}``).
        procedure_source: Source of reference_procedure.py.
        rows: Dataset rows (existing fields).
        schema: The data schema (column order).

    Returns:
        The folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOOLS_FILE).write_text(tool_code, encoding="utf-8")
    wrapped = [e if isinstance(e, dict) and "toolSpec" in e else {"toolSpec": e} for e in toolspecs]
    (folder / TOOLSPECS_FILE).write_text(json.dumps(wrapped, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / PROCEDURE_FILE).write_text(procedure_source, encoding="utf-8")
    write_rows_csv(folder / CSV_FILE, rows, schema)
    return folder


# --------------------------------------------------------------------------------------- execution

@dataclass
class _RowRun:
    """What one row's execution produced, before validation."""

    ok: bool
    error: str = ""
    result: Any = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    tools_called: list[tuple[str, Any]] = field(default_factory=list)  # (tool, input) incl. failing rows

    def fingerprint(self) -> str:
        return json.dumps([self.ok, self.error, self.result, self.calls], sort_keys=True, default=repr)


def _execute(folder: Path, cases: list[dict[str, str]], limits: SandboxLimits | None) -> SandboxResult:
    with tempfile.TemporaryDirectory(prefix="sopforge-gt-") as tmp:
        work = Path(tmp) / "bundle"
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", HARNESS_FILE))
        (work / HARNESS_FILE).write_text(HARNESS_SOURCE, encoding="utf-8")
        payload = {"op": "run_function", "function": "run_case", "tools_entry": TOOLS_FILE,
                   "calls": [{"args": [case]} for case in cases]}
        return run_in_sandbox(work, HARNESS_FILE, payload, limits=limits)


def _row_runs(result: SandboxResult) -> list[_RowRun]:
    runs = []
    for outcome in result.results:
        recorded = [(c.tool, c.input) for c in outcome.tool_calls or []]
        if not outcome.ok:
            err = outcome.error
            text = f"{err.type}: {err.message}" if err else "raised"
            failed = [c for c in outcome.tool_calls or [] if not c.ok]
            if failed:
                text += f" (raised by tool {failed[-1].tool} called with {json.dumps(failed[-1].input, default=repr)})"
            elif err and err.line and err.type != "ToolUseError":
                text = f"{err.type} at line {err.line}: {err.message}"
            runs.append(_RowRun(ok=False, error=text, tools_called=recorded))
        elif not outcome.json_ok or outcome.omitted:
            why = outcome.unencodable or "result too large"
            runs.append(_RowRun(ok=False, error=f"returned a value that is not JSON-encodable ({why})",
                                tools_called=recorded))
        else:
            body = outcome.result
            runs.append(_RowRun(ok=True, result=body["result"], calls=body["calls"], tools_called=recorded))
    return runs


# --------------------------------------------------------------------------------------- values

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values that does not let True pass for 1 (1 and 1.0 are equal)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _value_problem(f: FieldSpec, value: Any) -> tuple[ExcludedKind, str] | None:
    shown = f"{f.name}={value!r}"
    if f.type == "boolean":
        return None if isinstance(value, bool) else ("invalid_output", f"{shown} is not a boolean (True/False)")
    if f.choices:
        if value in f.choices:
            return None
        return ("invalid_output", f"{shown} is not one of {' | '.join(f.choices)}")
    if f.type in ("integer", "float"):
        if not _is_number(value) or (f.type == "integer" and not isinstance(value, int)):
            return ("invalid_output", f"{shown} is not {'an integer' if f.type == 'integer' else 'a number'}")
        if isinstance(value, float) and not math.isfinite(value):
            return ("invalid_output", f"{shown} is not a finite number")
        if f.minimum is not None and not f.minimum <= value <= f.maximum:
            return ("out_of_range", f"{shown} is outside its range {f.minimum} to {f.maximum}")
        return None
    if f.type.startswith("list["):
        return None if isinstance(value, list) else ("invalid_output", f"{shown} is not a list")
    if not isinstance(value, str) or not value.strip():
        return ("invalid_output", f"{shown} is not a non-empty string")
    if f.type in ("date", "datetime"):
        parse = datetime.date.fromisoformat if f.type == "date" else datetime.datetime.fromisoformat
        try:
            parse(value)
        except ValueError:
            return ("invalid_output", f"{shown} is not an ISO {f.type}")
    return None


def _validate(run: _RowRun, schema: DataSchema) -> tuple[ExcludedKind, str] | None:
    """The first reason a successful run cannot become a task (kinds in order of gravity)."""
    failed = [c for c in run.calls if c.get("error")]
    if failed:
        return ("exception", f"tool {failed[0]['tool']} raised {failed[0]['error']} and the procedure caught it; "
                             "let a failing call propagate so the row is excluded")
    result = run.result
    if not isinstance(result, dict):
        return ("invalid_output", f"run_procedure returned a {type(result).__name__}, not a dict")
    fields = schema.to_be_obtained
    missing = [f.name for f in fields if f.name not in result]
    if missing:
        return ("invalid_output", f"the returned dict misses {', '.join(missing)}")
    problems = [p for f in fields if (p := _value_problem(f, result[f.name]))]
    for kind in ("invalid_output", "out_of_range"):
        found = [text for k, text in problems if k == kind]
        if found:
            return (kind, "; ".join(found))
    mismatches = []
    for f in fields:
        if f.decision:
            continue
        returned = [c["output"][f.name] for c in run.calls
                    if isinstance(c.get("output"), dict) and f.name in c["output"]]
        if not returned:
            mismatches.append(f"{f.name}={result[f.name]!r} was returned by no tool call")
        elif not json_equal(returned[-1], result[f.name]):
            mismatches.append(f"{f.name}={result[f.name]!r} but the tools returned {returned[-1]!r}")
    if mismatches:
        return ("intermediate_mismatch", "; ".join(mismatches))
    return None


# --------------------------------------------------------------------------------------- checks

def _quoted(items: list[str]) -> str:
    shown = "; ".join(items[:MAX_QUOTED])
    return shown + (f"; … {len(items) - MAX_QUOTED} more" if len(items) > MAX_QUOTED else "")


def _procedure_checks(source: str) -> list[CheckResult]:
    results = []
    for r in check_code(source, allowed_imports=DEFAULT_ALLOWED):
        if not r.passed:
            results.append(check(r.name.replace("tools.policy", "ground_truth.procedure_policy"), False,
                                 f"{PROCEDURE_FILE}: {r.message}", **r.details))
    if results:
        return results
    results.append(check("ground_truth.procedure_policy", True, f"{PROCEDURE_FILE} passes the sandbox policy"))
    tree = ast.parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == PROCEDURE_FUNCTION), None)
    positional = len(fn.args.posonlyargs) + len(fn.args.args) if fn else 0
    ok = fn is not None and (positional >= 2 or fn.args.vararg is not None)
    results.append(check("ground_truth.procedure_signature", ok,
                         f"{PROCEDURE_FILE} defines def {PROCEDURE_FUNCTION}(manager, case) at module level" if ok else
                         f"{PROCEDURE_FILE} must define def {PROCEDURE_FUNCTION}(manager, case) at module level "
                         "(two positional parameters) returning a dict"))
    return results


def _coverage(tasks: list[Task], schema: DataSchema) -> dict[str, dict[str, int]]:
    fields = [*schema.decisions,
              *[f for f in schema.to_be_obtained if not f.decision and (f.type == "boolean" or f.choices)]]
    coverage: dict[str, dict[str, int]] = {}
    for f in fields:
        counts = dict.fromkeys(f.labels(), 0)
        for task in tasks:
            value = task.expected_outputs.get(f.name) if f.decision else task.hidden.get(f.name)
            label = ("true" if value else "false") if isinstance(value, bool) else value
            if label in counts:
                counts[label] += 1
        coverage[f.name] = counts
    return coverage


def _call_checks(runs: list[_RowRun], tasks: list[Task], row_ids: list[str], specs: dict[str, dict[str, Any]],
                 graph: APIGraph) -> list[CheckResult]:
    results = []
    unknown: dict[str, int] = {}
    bad_inputs: dict[str, str] = {}
    for run, row_id in zip(runs, row_ids, strict=True):
        for tool, tool_input in run.tools_called:
            if tool not in specs:
                unknown[tool] = unknown.get(tool, 0) + 1
                continue
            props = specs[tool].get("properties") or {}
            keys = set(tool_input) if isinstance(tool_input, dict) else set()
            extra = sorted(keys - set(props)) if props else []
            missing = [p for p in specs[tool].get("required") or [] if p not in keys]
            if extra or missing:
                parts = ([f"unknown parameter(s) {', '.join(extra)}"] if extra else []) + \
                        ([f"missing required {', '.join(missing)}"] if missing else [])
                bad_inputs.setdefault(f"{tool}: {'; '.join(parts)}", row_id)
    listed = ", ".join(f"{t} ({n} call{'s' if n != 1 else ''})" for t, n in unknown.items())
    results.append(check(
        "ground_truth.known_tools", not unknown,
        f"the procedure calls tools that are not in {TOOLSPECS_FILE}: {listed}; call only: {', '.join(specs)}"
        if unknown else f"every call names a tool of {TOOLSPECS_FILE}", tools=sorted(unknown)))
    results.append(check(
        "ground_truth.call_inputs", not bad_inputs,
        "tool arguments that do not match the toolSpec: "
        + _quoted([f"{k} (first in {v})" for k, v in bad_inputs.items()])
        + "; pass exactly the toolSpec's properties" if bad_inputs else "every call passes the toolSpec's parameters",
        problems=list(bad_inputs)[:MAX_QUOTED]))

    in_graph = set(graph.names)
    prerequisites = {a.api_name: [d.dependent_api for d in a.direct_dependencies if d.dependent_api in in_graph]
                     for a in graph.apis}
    order_problems: dict[str, str] = {}
    for task in tasks:
        seen: set[str] = set()
        for call in task.expected_calls:
            for before in prerequisites.get(call.tool, []):
                if before not in seen:
                    order_problems.setdefault(f"{call.tool} called before its prerequisite {before}", task.task_id)
            seen.add(call.tool)
    results.append(check(
        "ground_truth.call_order", not order_problems,
        "call sequences that break the API graph's dependencies: "
        + _quoted([f"{k} (first in {v})" for k, v in order_problems.items()])
        + "; call every prerequisite API first, in SOP order" if order_problems
        else "every call sequence respects the API graph", problems=list(order_problems)[:MAX_QUOTED]))

    called = {c.tool for t in tasks for c in t.expected_calls}
    unused = [n for n in graph.names if n not in called]
    results.append(check(
        "ground_truth.apis_used", not unused,
        f"APIs of the graph that no task calls: {', '.join(unused)}; the SOP step they implement is never executed"
        if unused else "every API of the graph is called by some task", severity="warning", apis=unused))
    return results


def _by_reason(excluded: list[ExcludedRow]) -> list[str]:
    """``"id1, id2 and 3 more: reason"`` per distinct reason, so a re-ask is not one reason repeated."""
    groups: dict[str, list[str]] = {}
    for e in excluded:
        groups.setdefault(e.reason, []).append(e.row_id)
    items = []
    for reason, ids in groups.items():
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        items.append(f"{', '.join(ids[:3])}{more}: {reason}")
    return items


def _row_checks(excluded: list[ExcludedRow], rows_total: int, max_share: float) -> list[CheckResult]:
    share = len(excluded) / rows_total if rows_total else 1.0
    quoted = _quoted(_by_reason(excluded))
    if not excluded:
        rows = check("ground_truth.rows_excluded", True, f"all {rows_total} rows yield a valid result")
    else:
        over = share > max_share
        rows = check("ground_truth.rows_excluded", False,
                     f"{len(excluded)} of {rows_total} rows excluded ({share:.0%}; "
                     f"{'more than' if over else 'within'} the {max_share:.0%} allowed): {quoted}",
                     severity="error" if over else "warning", excluded=len(excluded), share=round(share, 4))
    invalid = _by_reason([e for e in excluded if e.kind == "invalid_output"])
    mismatch = _by_reason([e for e in excluded if e.kind == "intermediate_mismatch"])
    return [
        rows,
        check("ground_truth.outputs_valid", not invalid,
              "the procedure returned invalid values: " + _quoted(invalid) + "; return every to-be-obtained field, "
              "each decision with one of its allowed values exactly as spelled in the schema"
              if invalid else "every returned value has its schema type and allowed values",
              rows=sum(e.kind == "invalid_output" for e in excluded)),
        check("ground_truth.intermediates_from_tools", not mismatch,
              "intermediate values differ from what the tools returned: " + _quoted(mismatch)
              + "; return each intermediate field exactly as the tool returned it"
              if mismatch else "intermediate values equal the tool results",
              rows=sum(e.kind == "intermediate_mismatch" for e in excluded)),
    ]


def _coverage_checks(gt: GroundTruth) -> list[CheckResult]:
    table = gt.coverage_table_text()
    unreached = gt.unreached()
    counts = "; ".join(f"{name}: " + ", ".join(f"{v} {n}" for v, n in gt.coverage[name].items())
                       for name in gt.output_columns if name in gt.coverage)
    inter = [c for c in gt.coverage if c not in gt.output_columns]
    unreached_inter = gt.unreached(inter)
    return [
        check("ground_truth.coverage", not unreached,
              f"decision outcomes that no task reaches: {', '.join(unreached)} (tasks per outcome: {counts}); "
              "follow the SOP's rules for these outcomes exactly, thresholds and precedence included"
              if unreached else f"every decision outcome is reached ({counts})",
              unreached=unreached, table=table),
        check("ground_truth.intermediate_coverage", not unreached_inter,
              f"intermediate values that no task reaches: {', '.join(unreached_inter)}"
              if unreached_inter else "every enum/boolean intermediate value is reached",
              severity="warning", unreached=unreached_inter),
    ]


# --------------------------------------------------------------------------------------- entry point

def compute_ground_truth(bundle_folder: Path, schema: DataSchema, api_graph: APIGraph, rows: list[dict[str, Any]],
                         *, max_excluded_share: float = MAX_EXCLUDED_SHARE, limits: SandboxLimits | None = None,
                         check_determinism: bool = True) -> tuple[GroundTruth, list[CheckResult]]:
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

    def result(tasks: list[Task], excluded: list[ExcludedRow]) -> GroundTruth:
        return GroundTruth(procedure=ReferenceProcedure(source=source), id_field=id_field, rows_total=len(rows),
                           tasks=tasks, excluded=excluded, coverage=_coverage(tasks, schema),
                           columns=schema.names, input_columns=inputs, hidden_columns=hidden,
                           intermediate_columns=intermediate, output_columns=outputs)

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
        # One validation per task (nested calls included) keeps 10,000 rows cheap.
        tasks.append(Task.model_validate({
            "task_id": row_id, "row_index": i, "inputs": {c: row.get(c) for c in inputs},
            "hidden": {**{c: row.get(c) for c in hidden}, **{c: values[c] for c in intermediate}},
            "expected_outputs": {c: values[c] for c in outputs},
            "expected_calls": [{"tool": c["tool"], "input": c["input"], "output": c["output"]} for c in run.calls]}))
    gt = result(tasks, excluded)
    checks += _row_checks(excluded, len(rows), max_excluded_share)
    checks += _call_checks(runs, tasks, row_ids, specs, api_graph)
    checks += _coverage_checks(gt)
    if second is not None:
        checks.append(_determinism_check(second, runs, row_ids))
    return gt, checks


_BundleReport = tuple[list[CheckResult], dict[str, dict[str, Any]], list[dict[str, str]]]


def _bundle_checks(folder: Path, schema: DataSchema, rows: list[dict[str, Any]]) -> _BundleReport:
    """``ground_truth.bundle``: files present, toolspecs readable, CSV cells == the rows; also the specs and cells."""
    missing = [n for n in (TOOLS_FILE, TOOLSPECS_FILE, PROCEDURE_FILE) if not (folder / n).is_file()]
    if missing:
        return [check("ground_truth.bundle", False, f"the bundle misses {', '.join(missing)}", missing=missing)], {}, []
    try:
        specs = load_toolspecs(folder / TOOLSPECS_FILE)
    except (ValueError, OSError) as exc:
        return [check("ground_truth.bundle", False, f"{TOOLSPECS_FILE} cannot be read: {exc}")], {}, []
    if not rows:
        return [check("ground_truth.bundle", False, "there are no dataset rows to run the procedure on")], specs, []
    if not (folder / CSV_FILE).is_file():
        write_rows_csv(folder / CSV_FILE, rows, schema)
    with open(folder / CSV_FILE, newline="", encoding="utf-8") as handle:
        csv_rows = list(csv.DictReader(handle))
    problems = []
    names = [f.name for f in schema.existing]
    missing_cols = [n for n in names if csv_rows and n not in csv_rows[0]]
    if missing_cols:
        problems.append(f"{CSV_FILE} lacks the column(s) {', '.join(missing_cols)}")
    elif len(csv_rows) != len(rows):
        problems.append(f"{CSV_FILE} has {len(csv_rows)} rows but the dataset has {len(rows)}")
    else:
        # The case handed to the procedure is read from the CSV; the tasks record the typed rows.
        # They are one and the same only if every cell is the row value spelled by csv_cell.
        for i, (cells, row) in enumerate(zip(csv_rows, rows, strict=True)):
            bad = next((n for n in names if cells.get(n) != csv_cell(row.get(n))), None)
            if bad is not None:
                problems.append(f"{CSV_FILE} row {i + 1} has {bad}={cells.get(bad)!r} where the dataset row "
                                f"has {row.get(bad)!r} (written as {csv_cell(row.get(bad))!r})")
                break
    if problems:
        return [check("ground_truth.bundle", False, "; ".join(problems))], specs, csv_rows
    done = check("ground_truth.bundle", True, f"bundle complete: {len(specs)} tools, {len(rows)} rows")
    return [done], specs, csv_rows


def _determinism_check(second: SandboxResult, runs: list[_RowRun], row_ids: list[str]) -> CheckResult:
    """Compare the first run with ``second``, the run of the same cases in reverse order."""
    if not second.ok:
        return check("ground_truth.deterministic", False, "the second run (fresh process, rows in reverse order) "
                     f"failed ({second.error_kind}): {second.error_message.replace(HARNESS_FILE, PROCEDURE_FILE)}")
    again = _row_runs(second)[::-1]
    changed = []
    for run, rerun, row_id in zip(runs, again, row_ids, strict=True):
        if run.fingerprint() == rerun.fingerprint():
            continue
        if run.ok != rerun.ok or run.error != rerun.error:
            what = f"{'ok' if run.ok else run.error} then {'ok' if rerun.ok else rerun.error}"
        elif not json_equal(run.result, rerun.result):
            what = f"result {run.result!r} then {rerun.result!r}"
        else:
            what = "a different call sequence"
        changed.append(f"{row_id}: {what}")
    return check("ground_truth.deterministic", not changed,
                 f"{len(changed)} rows changed when re-run in a fresh process with the rows in reverse order: "
                 + _quoted(changed) + "; results must not depend on state kept between cases, object ids or "
                 "anything else that varies between runs" if changed
                 else "a second run (fresh process, rows reversed) reproduces every result and call sequence",
                 changed=len(changed))
