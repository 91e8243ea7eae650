"""Judging of the tools' runtime results: one ``tools.runtime.*`` or ``tools.state.*`` check per kind of problem.

The runs come from the replay driver (:mod:`sopforge.families.sop_tools.verify.replay`) driven by
:func:`sopforge.families.sop_tools.verify.tool_runtime.check_runtime`: one run per row (its whole
chain plus the repeated first call), one per unknown-id probe, and one fresh Manager at the end.
"""

from __future__ import annotations

import datetime
from typing import Any

from sopforge.parsing import one_line
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.tools import ToolSpecs
from sopforge.families.sop_tools.verify.ground_truth_checks import json_equal
from sopforge.families.sop_tools.verify.replay import STATE_METHOD, ReplayRun
from sopforge.families.sop_tools.verify.tool_common import _few, _Findings, _result, _short, _valid_schemas, _validator

__all__ = ["ARGUMENT_CHECK_CALLS", "RECORD_ID", "judge_probes", "judge_rows", "judge_state", "record_id"]

# The arguments_valid warning validates this many calls (jsonschema costs ~0.1 ms a call; the
# blocking rows_valid check already covers every row's own values).
ARGUMENT_CHECK_CALLS = 2000
RECORD_ID = "record_id"


def record_id(table: str, case_id: Any) -> str:
    """What a write returns: ``{"record_id": "<table>/<case id>"}`` (docs/bundle.md)."""
    return f"{table}/{case_id}"


def _value_problem(value: Any, field) -> str | None:
    if value is None and (field.present_if is not None or field.role == "to_be_obtained"):
        # A conditional field has no value on some rows; an intermediate value does not exist on a case its
        # step does not apply to (the tool answers every valid case, with None there: issue 19).
        return None
    t = field.type
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif t == "boolean":
        ok = isinstance(value, bool)
    elif t.startswith("list"):
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, str)
    if not ok:
        return f"{field.name}={_short(value, 40)} is a {type(value).__name__}, schema type {t}"
    if field.choices and value not in field.choices:
        return f"{field.name}={value!r} is not one of {' | '.join(field.choices)}"
    if t == "date" and not _is_date(value):
        return f"{field.name}={value!r} is not a date YYYY-MM-DD"
    return None


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def judge_rows(runs: list[ReplayRun], rows: list[dict[str, Any]], labels: list[str], order: list[str],
               specs: ToolSpecs, graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    """The ``tools.runtime.*`` checks of the row runs (results of reads, shapes, arguments, stubs)."""
    fields = {f.name: f for f in schema.fields}
    existing = {f.name for f in schema.existing}
    decisions = {f.name for f in schema.decisions}
    writes = {a.api_name for a in graph.write_apis}
    # Values a case may lack: a conditional field, or an intermediate whose step does not apply to the case.
    may_be_none = ({f.name for f in schema.existing if f.present_if is not None}
                   | {f.name for f in schema.to_be_obtained if not f.decision})
    valid = {n: _validator(s) for n, s in _valid_schemas(specs).items()}
    raised, shape, keys, decided, types, data, recall, bad_args = (_Findings() for _ in range(8))
    seen: dict[str, dict[str, set[str]]] = {n: {"in": set(), "out": set(), "rows": set()} for n in order}
    checked_args = 0
    for label, row, run in zip(labels, rows, runs):
        if run.too_large is not None:
            shape.add("size", label, f"one row's results are too large ({run.too_large} bytes); return only the "
                      "API's output fields")
            continue
        if not run.ok:
            raised.add(("driver", run.error), label, f"the check driver failed: {one_line(run.error, 120)}")
            continue
        entries = run.calls
        for step, entry in enumerate(entries):
            tool = entry.get("tool")
            if "skipped" in entry:
                keys.add((tool, "skipped"), label, f"{tool} was not called: no upstream value for "
                         f"{', '.join(entry['skipped'])}")
                continue
            if "error" in entry:
                raised.add((tool, entry["error"].split(":", 1)[0]), label,
                           f"{tool}({_short(entry.get('input'), 90)}) raised {one_line(entry['error'], 100)}")
                continue
            value = entry.get("output")
            if step == len(order):
                if value != entries[0].get("output"):
                    recall.add(tool, label, f"{tool}: {_short(entries[0].get('output'), 60)} then {_short(value, 60)}")
                continue
            if "unencodable" in entry:
                shape.add((tool, "json"), label, f"{tool}: returned a value json.dumps cannot encode "
                          f"({entry['unencodable']})")
                continue
            if not isinstance(value, dict) or not value:
                shape.add((tool, "dict"), label, f"{tool}: returned {_short(value, 60)}, not a non-empty dict")
                continue
            args = entry.get("input") or {}
            absent = any(v is None and k in may_be_none for k, v in args.items())  # a branch never passes it
            if tool in valid and not absent and checked_args < ARGUMENT_CHECK_CALLS and (
                    err := next(iter(valid[tool].iter_errors(args)), None)) is not None:
                bad_args.add((tool, tuple(err.path)), label, f"{tool}: {one_line(err.message, 80)}")
            checked_args += 1
            if tool in writes:
                continue  # judge_state judges what a write returns and stores
            api = graph.api(tool)
            unknown = [k for k in value if k not in fields]
            missing = [k for k in api.output_names if k not in value]
            if unknown or missing:
                keys.add((tool, tuple(unknown), tuple(missing)), label, f"{tool}: " + "; ".join(
                    ([f"unknown keys {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing outputs {', '.join(missing)}"] if missing else [])))
            if hits := sorted(decisions & set(value)):
                decided.add(tool, label, f"{tool} returned {', '.join(hits)}")
            for k, v in value.items():
                if k in fields and k not in decisions and (problem := _value_problem(v, fields[k])):
                    types.add((tool, k), label, f"{tool}: {problem}")
                elif k in existing and k in row and not _same(v, row[k]):
                    data.add((tool, k), label, f"{tool}: {k}={_short(v, 30)} but the record holds {_short(row[k], 30)}")
            seen[tool]["in"].add(_short(entry.get("input"), 10_000))
            seen[tool]["out"].add(_short(value, 10_000))
            seen[tool]["rows"].update(_short(row.get(k), 200) + k for k in api.output_names if k in existing)
    stubs = []
    for name in order:
        if name in writes:
            continue
        s, outputs = seen[name], graph.api(name).output_names
        computed = [k for k in outputs if k not in existing]
        data_varies = len(s["rows"]) > len([k for k in outputs if k in existing])
        if len(s["in"]) >= 2 and len(s["out"]) == 1 and (computed or data_varies):
            stubs.append(f"{name} returned {next(iter(s['out']))[:80]} for all {len(s['in'])} distinct inputs")

    def judged(name: str, found: _Findings, lead: str, ok: str, **kw: Any) -> CheckResult:
        lines = found.lines()
        return _result(name, lines, f"{lead} {_few(lines)}", ok, problems=lines[:20], rows=found.rows, **kw)

    return [
        judged("tools.runtime.calls_succeed", raised, f"calls raised on {raised.rows} of {len(rows)} rows, every one "
               "a valid case on record (raise only for invalid arguments; where a step does not apply to a case, "
               "return None for the outputs that do not exist):", f"every call succeeded on {len(rows)} rows"),
        judged("tools.runtime.results_shape", shape, "every tool must return a non-empty, JSON-encodable dict "
               "(convert values with int(), float(), str(), bool()):", "results are JSON dicts"),
        judged("tools.runtime.result_keys", keys, "result keys must be schema fields and include every output of the "
               "API:", "result keys are the declared outputs"),
        judged("tools.runtime.no_decision_fields", decided, "tools must never return a [decision] field; the agent "
               "decides by applying the SOP:", "no tool returns a decision field"),
        judged("tools.runtime.result_types", types, "returned values must have their schema type (convert CSV "
               "strings) and one of its choices:", "returned values have their schema types"),
        judged("tools.runtime.matches_data", data, "returned existing fields must equal the record's values:",
               "returned record fields equal the data"),
        _result("tools.runtime.not_constant", stubs, "tools return the same result whatever the row (a stub): "
                + _few(stubs) + "; look the record up and compute from it", "every tool's results vary with its inputs",
                tools=stubs),
        judged("tools.runtime.idempotent", recall, "calling the first tool again after the chain gave another result:",
               "repeated calls give the same result", severity="warning"),
        judged("tools.runtime.arguments_valid", bad_args, "arguments passed along the chain break a toolSpec:",
               "chain arguments validate against the toolSpecs", severity="warning"),
    ]


def judge_probes(runs: list[ReplayRun], probes: list[tuple[str, list[dict]]]) -> CheckResult:
    """``tools.runtime.unknown_id_raises``: the probed call (the last of each probe plan) must raise."""
    silent, inconclusive = [], []
    for (name, plan), run in zip(probes, runs):
        last = run.calls[-1] if run.ok and run.calls else {}
        shown = ", ".join(f"{k}={v!r}" for k, v in plan[-1]["args"].items() if k in plan[-1]["args"])
        if "error" in last:
            continue
        if "output" in last:
            silent.append(f"{name}({shown}) returned {_short(last.get('output'), 60)}")
        else:
            inconclusive.append(name)  # the chain before the probe failed; calls_succeed reports it
    return _result("tools.runtime.unknown_id_raises", silent, "tools must look the record up and raise ValueError for "
                   "an unknown identifier: " + _few(silent), f"{len(probes) - len(inconclusive)} tools raise for an "
                   "unknown identifier", problems=silent, inconclusive=inconclusive)


def judge_state(runs: list[ReplayRun], fresh: ReplayRun, labels: list[str], graph: APIGraph, schema: DataSchema,
                id_field: str | None) -> list[CheckResult]:
    """The ``tools.state.*`` checks: the Manager's tables, what reads and writes change, and isolation.

    Args:
        runs: One run per row, on one Manager shared by every row (the first saw a new Manager).
        fresh: A run with no call on a Manager made after every row ran.
        labels: How messages name the rows.
        graph: Which APIs write, into which table, and which are reads.
        schema: The data schema.
        id_field: The case identifier (the key of every record a write makes).
    """
    tables = sorted(graph.tables())
    writes = {a.api_name: a for a in graph.write_apis}
    ok_runs = [r for r in runs if r.ok]
    stateless = not any(r.stateful for r in ok_runs) if ok_runs else False
    method = _result(
        "tools.state.method", ["missing"] if stateless and (writes or tables) else [],
        f"the Manager has no {STATE_METHOD}(): keep every record the write tools make in self._tables "
        f"({', '.join(tables)}) and return a copy of it from {STATE_METHOD}(self)",
        f"the Manager exposes {STATE_METHOD}()" if not stateless else "no write tool: no state needed")
    if stateless:
        return [method]
    first = ok_runs[0] if ok_runs else None
    table_problems = []
    if first is not None and (first.tables != tables or first.initial_records):
        table_problems.append(f"a new Manager holds tables {first.tables} with {first.initial_records} record(s); "
                              f"the graph's write tables are {tables}, all empty at the start")
    isolated = []
    if fresh.ok and (fresh.initial_records or fresh.tables != tables):
        isolated.append(f"a Manager created after the rows were run starts with {fresh.initial_records} record(s) "
                        f"in {fresh.tables}: records live outside the instance (a module-level or class-level "
                        "dict), so one case's writes leak into every later Manager")
    reads_write, records, returns = _Findings(), _Findings(), _Findings()
    for label, run in zip(labels, runs):
        if not run.ok:
            continue
        for entry in run.calls:
            tool, diff = entry.get("tool"), entry.get("state_diff") or {}
            if "output" not in entry:
                continue
            api = writes.get(tool)
            if api is None:
                if diff:
                    reads_write.add(tool, label, f"{tool} changed {', '.join(sorted(diff))}")
                continue
            args = entry.get("input") or {}
            case = args.get(id_field) if id_field else None
            want = {api.writes_table: {str(case): args}}
            if not json_equal(diff, want):
                what = "changed nothing" if not diff else f"changed {_short(diff, 90)}"
                records.add((tool, "record"), label, f"{tool} {what}; it must store its arguments as the record "
                            f"{api.writes_table}/{case}")
            expected = {"record_id": record_id(api.writes_table, case)}
            if not json_equal(entry.get("output"), expected):
                returns.add((tool, "result"), label, f"{tool} returned {_short(entry.get('output'), 60)}, "
                            f"expected {_short(expected, 60)}")
    lines = {k: f.lines() for k, f in (("reads", reads_write), ("records", records), ("returns", returns))}
    return [
        method,
        _result("tools.state.tables", table_problems, "; ".join(table_problems),
                f"a new Manager holds the empty tables {', '.join(tables)}", problems=table_problems),
        _result("tools.state.read_only", lines["reads"], "tools the API graph declares as reads changed the "
                "database: " + _few(lines["reads"]) + "; a read must change nothing (if it records something, it is "
                "a write and its toolSpec must say so)", "reads change nothing", problems=lines["reads"][:20]),
        _result("tools.state.write_record", lines["records"], "write tools must store exactly their arguments as the "
                "one record of the case in their table: " + _few(lines["records"]),
                "every write stores its arguments as the case's record in its table", problems=lines["records"][:20]),
        _result("tools.state.write_result", lines["returns"], "write tools must return only "
                "{\"record_id\": \"<table>/<case id>\"}: " + _few(lines["returns"]),
                "writes return the id of the record they made", problems=lines["returns"][:20]),
        _result("tools.state.isolated", isolated, "; ".join(isolated) + "; keep self._tables in __init__",
                "a new Manager starts with empty tables after other cases wrote", problems=isolated),
    ]
