"""Judging the reference procedure's runs: each row's result, then the ``ground_truth.*`` checks.

A run becomes a task only if its values have their schema types and its intermediates equal the
tool results (:func:`_validate`); the checks report the procedure's policy and signature, the
excluded rows, the calls (known tools, their inputs, their order against the API graph), the
coverage of every decision outcome and the determinism of a second run.
"""

from __future__ import annotations

import ast
import datetime
import math
from typing import Any

from sopforge.pyast import parse_python
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema, FieldSpec
from sopforge.families.sop_tools.models.ground_truth import ExcludedKind, ExcludedRow, GroundTruth, Task
from sopforge.families.sop_tools.verify.ground_truth_bundle import PROCEDURE_FILE, PROCEDURE_FUNCTION, TOOLSPECS_FILE
from sopforge.families.sop_tools.verify.ground_truth_harness import HARNESS_FILE, _row_runs, _RowRun
from sopforge.sandbox import DEFAULT_ALLOWED, SandboxResult, check_code

__all__ = ["MAX_QUOTED", "json_equal"]

MAX_QUOTED = 5


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
    # Decisions are always returned; an intermediate only when its branch obtained it (an early
    # exit skips later look-ups), and then as the tool returned it.
    missing = [f.name for f in schema.decisions if f.name not in result]
    if missing:
        return ("invalid_output", f"the returned dict misses the decision field(s) {', '.join(missing)}")
    fields = [f for f in schema.to_be_obtained if f.name in result]
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
            mismatches.append(f"{f.name}={result[f.name]!r} was returned by no tool call on this path (leave out "
                              "an intermediate the branch did not obtain)")
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
    tree = parse_python(source)
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
    # A data prerequisite must have run first (its output is this call's input); a state or temporal
    # one only orders the two when both happen: on a branch that skips it, nothing is out of order.
    prerequisites = {a.api_name: [(d.dependent_api, d.dependency_type == "data_dependency")
                                  for d in a.direct_dependencies if d.dependent_api in in_graph]
                     for a in graph.apis}
    order_problems: dict[str, str] = {}
    for task in tasks:
        tools = [c.tool for c in task.expected_calls]
        for i, tool in enumerate(tools):
            for before, needed in prerequisites.get(tool, []):
                if before in tools[i + 1:] and before not in tools[:i]:
                    order_problems.setdefault(f"{tool} called before its prerequisite {before}", task.task_id)
                elif needed and before not in tools:
                    order_problems.setdefault(f"{tool} called without its data prerequisite {before}", task.task_id)
    results.append(check(
        "ground_truth.call_order", not order_problems,
        "call sequences that break the API graph's dependencies: "
        + _quoted([f"{k} (first in {v})" for k, v in order_problems.items()])
        + "; call every prerequisite API first, in SOP order" if order_problems
        else "every call sequence respects the API graph", problems=list(order_problems)[:MAX_QUOTED]))

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
