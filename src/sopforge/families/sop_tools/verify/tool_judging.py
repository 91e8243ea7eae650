"""Judging of the tools' runtime results: one ``tools.runtime.*`` check per kind of problem.

The outcomes come from the sandboxed chain runs of :func:`sopforge.families.sop_tools.verify.tool_runtime.check_runtime`:
one outcome per row (its whole chain plus the repeated first call) and one per unknown-id probe.
"""

from __future__ import annotations

import datetime
from typing import Any

from sopforge.parsing import one_line
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.tools import ToolSpecs
from sopforge.sandbox import CallOutcome
from sopforge.families.sop_tools.verify.tool_common import _few, _Findings, _result, _short, _valid_schemas, _validator

__all__ = ["ARGUMENT_CHECK_CALLS"]

# The arguments_valid warning validates this many calls (jsonschema costs ~0.1 ms a call; the
# blocking rows_valid check already covers every row's own values).
ARGUMENT_CHECK_CALLS = 2000


def _failed_call(outcome: CallOutcome) -> tuple[Any, str]:
    """(group key, text) of the call that raised in a row."""
    calls = outcome.tool_calls or []
    bad = next((c for c in reversed(calls) if not c.ok), None)
    err = outcome.error
    where = f" at line {err.line}" if err and err.line else ""
    what = f"{err.type}{where}: {one_line(err.message, 100)}" if err else "failed"
    key = (bad.tool if bad else None, err.type if err else None, err.line if err else None)
    if bad is None:
        return key, f"the check driver raised {what}"
    return key, f"{bad.tool}({_short(bad.input, 90)}) raised {what}"


def _value_problem(value: Any, field) -> str | None:
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


def _judge_rows(outcomes: list[CallOutcome], rows: list[dict[str, Any]], labels: list[str], order: list[str],
                specs: ToolSpecs, graph: APIGraph, schema: DataSchema) -> list[CheckResult]:
    fields = {f.name: f for f in schema.fields}
    existing = {f.name for f in schema.existing}
    decisions = {f.name for f in schema.decisions}
    valid = {n: _validator(s) for n, s in _valid_schemas(specs).items()}
    raised, shape, keys, decided, types, data, recall, bad_args = (_Findings() for _ in range(8))
    seen: dict[str, dict[str, set[str]]] = {n: {"in": set(), "out": set(), "rows": set()} for n in order}
    checked_args = 0
    for label, row, outcome in zip(labels, rows, outcomes):
        if not outcome.ok:
            key, text = _failed_call(outcome)
            raised.add(key, label, text)
            continue
        if outcome.omitted or not isinstance(outcome.result, list):
            shape.add("size", label, f"one row's results are too large ({outcome.result_bytes} bytes); return only "
                      "the API's output fields")
            continue
        entries = outcome.result
        for step, entry in enumerate(entries):
            tool = entry.get("tool")
            if "skipped" in entry:
                keys.add((tool, "skipped"), label, f"{tool} was not called: no upstream value for "
                         f"{', '.join(entry['skipped'])}")
                continue
            value = entry.get("result")
            if step == len(order):
                if value != entries[0].get("result"):
                    recall.add(tool, label, f"{tool}: {_short(entries[0].get('result'), 60)} then {_short(value, 60)}")
                continue
            if "unencodable" in entry:
                shape.add((tool, "json"), label, f"{tool}: returned a value json.dumps cannot encode "
                          f"({entry['unencodable']})")
                continue
            if not isinstance(value, dict) or not value:
                shape.add((tool, "dict"), label, f"{tool}: returned {_short(value, 60)}, not a non-empty dict")
                continue
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
            if tool in valid and checked_args < ARGUMENT_CHECK_CALLS and (
                    err := next(iter(valid[tool].iter_errors(entry.get("input", {}))), None)) is not None:
                bad_args.add((tool, tuple(err.path)), label, f"{tool}: {one_line(err.message, 80)}")
            checked_args += 1
            seen[tool]["in"].add(_short(entry.get("input"), 10_000))
            seen[tool]["out"].add(_short(value, 10_000))
            seen[tool]["rows"].update(_short(row.get(k), 200) + k for k in api.output_names if k in existing)
    stubs = []
    for name in order:
        s, outputs = seen[name], graph.api(name).output_names
        computed = [k for k in outputs if k not in existing]
        data_varies = len(s["rows"]) > len([k for k in outputs if k in existing])
        if len(s["in"]) >= 2 and len(s["out"]) == 1 and (computed or data_varies):
            stubs.append(f"{name} returned {next(iter(s['out']))[:80]} for all {len(s['in'])} distinct inputs")

    def judged(name: str, found: _Findings, lead: str, ok: str, **kw: Any) -> CheckResult:
        lines = found.lines()
        return _result(name, lines, f"{lead} {_few(lines)}", ok, problems=lines[:20], rows=found.rows, **kw)

    return [
        judged("tools.runtime.calls_succeed", raised, f"calls raised on {raised.rows} of {len(rows)} rows:",
               f"every call succeeded on {len(rows)} rows"),
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


def _judge_probes(outcomes: list[CallOutcome], probes: list[tuple[str, list[dict]]]) -> CheckResult:
    silent, inconclusive = [], []
    for (name, plan), outcome in zip(probes, outcomes):
        override = plan[-1]["override"]
        shown = ", ".join(f"{k}={v!r}" for k, v in override.items())
        if outcome.ok:
            entries = outcome.result if isinstance(outcome.result, list) else []
            last = entries[-1] if entries else {}
            if "skipped" in last:
                inconclusive.append(name)
            else:
                silent.append(f"{name}({shown}) returned {_short(last.get('result'), 60)}")
            continue
        calls = outcome.tool_calls or []
        last = calls[-1] if calls else None
        probed = (last is not None and not last.ok and last.tool == name and isinstance(last.input, dict)
                  and all(last.input.get(k) == v for k, v in override.items()))
        if not probed:
            inconclusive.append(name)  # the chain before the probe failed; calls_succeed reports it
    return _result("tools.runtime.unknown_id_raises", silent, "tools must look the record up and raise ValueError for "
                   "an unknown identifier: " + _few(silent), f"{len(probes) - len(inconclusive)} tools raise for an "
                   "unknown identifier", problems=silent, inconclusive=inconclusive)
