"""§9 items 8–9, run in the sandbox (never in this process).

* **Oracle calls**: every tool whose required parameters are CSV columns, on every row, in
  one process with one shared Manager (as the harness does). Each call must succeed, return
  JSON, and return fields equal to the CSV cells of the same name.
* **Stubs**: a tool whose results are all empty, or identical across rows with different
  arguments (an error when the CSV holds different values for a returned field).
* **Determinism**: a second fresh process calls the rows in reverse order; every result must
  be identical (this also catches state that leaks from one row into the next). The sandbox
  pins ``PYTHONHASHSEED=0``, so salted ``hash()`` is caught statically instead.
* **Labels**: with a reference procedure (``run_procedure(manager, case)``), its decisions on
  each row's input columns must equal the output columns; contradicting task ids are listed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sopforge.audit.checks_data import hidden_columns, shown
from sopforge.audit.checks_specs import OracleTool
from sopforge.audit.loader import FolderContents
from sopforge.audit.values import cell_matches
from sopforge.checks import CheckResult, check
from sopforge.sandbox import CallOutcome, SandboxResult

__all__ = ["PROBE_TOOL", "check_determinism", "check_oracle", "check_reference", "process_failure",
           "reference_calls"]

PROBE_TOOL = "sopforgeAuditNoSuchTool"
_EXAMPLES = 5
_MAX_DETAIL = 200


def _grouped(items: list[dict], key, example) -> str:
    """'tool: N row(s), e.g. <example of the first>' per group, in first-seen order."""
    groups: dict[str, list[dict]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return "; ".join(f"{k}: {len(v)} row(s), e.g. {example(v[0])}" for k, v in list(groups.items())[:_EXAMPLES])


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == [] or value == ""


def process_failure(result: SandboxResult, what: str) -> CheckResult | None:
    """A failed check when the sandbox process itself did not complete, else None."""
    if result.ok:
        return None
    name = {"load_error": "runtime.tools_load", "policy_violation": "runtime.guard"}.get(
        result.error_kind or "", "runtime.completes")
    tail = result.stderr_tail.strip().splitlines()[-1:] if result.error_kind == "crash" else []
    return check(name, False, f"{what}: {result.error_kind}: {result.error_message}"
                 + (f" ({tail[0][:200]})" if tail else "") + f"; {result.completed} group(s) completed",
                 error_kind=result.error_kind, completed=result.completed)


def check_oracle(c: FolderContents, tools: list[OracleTool], groups: list[list[dict]],
                 result: SandboxResult) -> list[CheckResult]:
    """Judge the oracle run: success, JSON, CSV agreement, stubs, leakage, unknown-tool handling."""
    out = []
    failure = process_failure(result, "the oracle run of tools.py")
    if failure is not None:
        out.append(failure)
    else:
        out.append(check("runtime.tools_load", True, "tools.py loads and its Manager() instantiates in the sandbox"))
    outcomes: list[list[CallOutcome]] = result.results  # type: ignore[assignment]
    row_outcomes = outcomes[: len(groups)]
    if not row_outcomes:
        return out
    headers = set(c.header)
    outputs = set(c.output_columns)
    records = c.records
    raised, unencodable, not_object, mismatches = [], [], [], []
    leaked: dict[str, set[str]] = defaultdict(set)
    per_tool: dict[str, list[tuple[int, str, Any]]] = defaultdict(list)  # tool -> (task, input key, result)
    for task_id, calls in enumerate(row_outcomes):
        record = records[task_id]
        for call, outcome in zip(groups[task_id], calls):
            tool = call["tool"]
            if not outcome.ok:
                err = outcome.error
                raised.append({"task": task_id, "tool": tool,
                               "error": f"{err.type}: {err.message[:160]}" if err else "raised"})
                continue
            if not outcome.json_ok:
                unencodable.append({"task": task_id, "tool": tool, "where": outcome.unencodable})
                continue
            value = outcome.result
            per_tool[tool].append((task_id, _key(call["input"]), value))
            if not isinstance(value, dict):
                not_object.append(tool)
                continue
            for field, returned in value.items():
                if field in outputs:
                    leaked[tool].add(field)
                if field in headers and not cell_matches(returned, record.get(field, "")):
                    mismatches.append({"task": task_id, "tool": tool, "field": field, "returned": returned,
                                       "csv": record.get(field, "")})
    n_calls = sum(len(g) for g in groups[: len(row_outcomes)])
    out.append(check("runtime.calls_succeed", not raised,
                     f"{len(raised)} of {n_calls} oracle call(s) raised: "
                     + _grouped(raised, lambda r: r["tool"], lambda r: f"task {r['task']}: {r['error']}")
                     if raised else f"all {n_calls} oracle calls returned", calls=raised[:_MAX_DETAIL],
                     tasks=sorted({r["task"] for r in raised})))
    out.append(check("runtime.json_encodable", not unencodable,
                     f"{len(unencodable)} result(s) json.dumps cannot encode (the whole task fails in the harness): "
                     + _grouped(unencodable, lambda u: u["tool"], lambda u: f"task {u['task']}: {u['where']}")
                     if unencodable else "every result is JSON-encodable", calls=unencodable[:_MAX_DETAIL]))
    out.append(check("runtime.tool_matches_csv", not mismatches,
                     f"{len(mismatches)} returned value(s) differ from the CSV cell of the same name (the tool "
                     "ignores or contradicts its data): " + _grouped(
                         mismatches, lambda m: f"{m['tool']}.{m['field']}",
                         lambda m: f"task {m['task']} returned {m['returned']!r}, CSV has {m['csv']!r}") if mismatches
                     else "every returned field that is a CSV column equals the row's cell",
                     mismatches=mismatches[:_MAX_DETAIL], tasks=sorted({m["task"] for m in mismatches}),
                     tools=sorted({m["tool"] for m in mismatches})))
    if not_object:
        out.append(check("runtime.result_is_object", False,
                         f"tools returning something other than a JSON object: {shown(sorted(set(not_object)))}",
                         severity="warning", tools=sorted(set(not_object))))
    out += _stub_checks(per_tool, records)
    out.append(check("leakage.tool_returns_output", not leaked,
                     "tools return output (answer) columns, so the function-calling agent is graded on the tool "
                     "result, not its decision: " + "; ".join(f"{t}: {', '.join(sorted(f))}" for t, f in leaked.items())
                     if leaked else "no tool returns an output column", severity="warning",
                     tools={t: sorted(f) for t, f in leaked.items()}))
    if len(outcomes) > len(groups) and outcomes[len(groups)]:
        probe = outcomes[len(groups)][0]
        out.append(check("runtime.unknown_tool_raises", not probe.ok,
                         f"calling an unknown tool name returned {probe.result!r} instead of raising ValueError"
                         if probe.ok else "an unknown tool name raises", severity="warning"))
    return out


def _stub_checks(per_tool: dict[str, list[tuple[int, str, Any]]], records: list[dict[str, str]]) -> list[CheckResult]:
    stubs, ignores, constant = [], [], []
    for tool, calls in per_tool.items():
        if all(_empty(v) for _, _, v in calls):
            stubs.append(tool)
            continue
        inputs = {k for _, k, _ in calls}
        values = {_key(v) for _, _, v in calls}
        if len(inputs) < 2 or len(values) != 1:
            continue
        value = calls[0][2]
        varying = [f for f in (value if isinstance(value, dict) else {})
                   if f in records[0] and len({records[t][f] for t, _, _ in calls}) > 1]
        (ignores if varying else constant).append((tool, len(inputs), varying, value))
    out = [check("runtime.tool_stub", not stubs,
                 f"tools that return nothing ({{}}, None or empty) for every row: {shown(stubs)}"
                 if stubs else "no tool returns only empty results", tools=stubs)]
    out.append(check("runtime.tool_ignores_input", not ignores,
                     "tools return the same result for every row although the CSV differs: " + "; ".join(
                         f"{t} returns {_key(v)[:80]} for {n} distinct inputs ({', '.join(f)} varies in the CSV)"
                         for t, n, f, v in ignores) if ignores else "tool results vary with their data",
                     tools=[t for t, *_ in ignores]))
    if constant:
        out.append(check("runtime.tool_constant", False, "tools return one constant result for all inputs (check "
                         "they are not stubs): " + "; ".join(f"{t} ({n} distinct inputs)" for t, n, _, _ in constant),
                         severity="warning", tools=[t for t, *_ in constant]))
    return out


def _outcome_key(outcome: CallOutcome) -> str:
    if not outcome.ok:
        return f"raised {outcome.error.type if outcome.error else ''}: {outcome.error.message if outcome.error else ''}"
    return _key(outcome.result) if outcome.json_ok else f"unencodable {outcome.unencodable}"


def check_determinism(groups: list[list[dict]], first: SandboxResult, second: SandboxResult) -> list[CheckResult]:
    """Compare the oracle run with a fresh run of the same calls in reverse row order."""
    failure = process_failure(second, "the second (reverse-order) run of tools.py")
    if failure is not None:
        return [failure]
    n = len(groups)
    a: list[list[CallOutcome]] = first.results[:n]  # type: ignore[assignment]
    b: list[list[CallOutcome]] = list(reversed(second.results[:n]))  # type: ignore[arg-type]
    differ = []
    for task_id, (x, y) in enumerate(zip(a, b)):
        for call, ox, oy in zip(groups[task_id], x, y):
            kx, ky = _outcome_key(ox), _outcome_key(oy)
            if kx != ky:
                differ.append({"task": task_id, "tool": call["tool"], "first": kx[:200], "second": ky[:200]})
    return [check("runtime.deterministic", not differ,
                  f"{len(differ)} call(s) gave different results in a second fresh process (reverse row order): "
                  + _grouped(differ, lambda d: d["tool"],
                             lambda d: f"task {d['task']}: {d['first'][:80]} vs {d['second'][:80]}")
                  if differ else f"a second fresh process reproduced all {sum(map(len, a))} results",
                  calls=differ[:_MAX_DETAIL], tools=sorted({d["tool"] for d in differ}),
                  tasks=sorted({d["task"] for d in differ}))]


def reference_calls(c: FolderContents) -> list[dict]:
    """run_procedure calls: each row's input columns, as text exactly as in the CSV."""
    inputs = [col for col in c.input_columns if col in c.header]
    return [{"args": [{col: r[col] for col in inputs}]} for r in c.records]


def check_reference(c: FolderContents, result: SandboxResult, *, source: str) -> list[CheckResult]:
    """The reference procedure runs on every row and agrees with the output (and hidden) columns."""
    failure = process_failure(result, f"running {source}")
    outcomes: list[CallOutcome] = result.results  # type: ignore[assignment]
    if failure is not None and not outcomes:
        return [failure.model_copy(update={"name": "labels.reference_runs"})]
    outputs = [col for col in c.output_columns if col in c.header]
    hidden = set(hidden_columns(c))
    records = c.records
    broken, contradictions, hidden_diff = [], [], []
    for task_id, outcome in enumerate(outcomes):
        record = records[task_id]
        if not outcome.ok or not outcome.json_ok or not isinstance(outcome.result, dict):
            why = (f"{outcome.error.type}: {outcome.error.message[:120]}" if outcome.error
                   else "returned no JSON object")
            broken.append({"task": task_id, "error": why})
            continue
        value = outcome.result
        missing = [col for col in outputs if col not in value]
        if missing:
            broken.append({"task": task_id, "error": f"result lacks {', '.join(missing)}"})
        for col in outputs:
            if col in value and not cell_matches(value[col], record[col], casefold=True):
                contradictions.append({"task": task_id, "column": col, "reference": value[col], "csv": record[col]})
        for col, returned in value.items():
            if col in hidden and not cell_matches(returned, record.get(col, "")):
                hidden_diff.append({"task": task_id, "column": col, "reference": returned, "csv": record[col]})
    problems = ([failure.message] if failure is not None else []) + [
        f"task {b['task']}: {b['error']}" for b in broken[:_EXAMPLES]]
    out = [check("labels.reference_runs", not problems,
                 f"the reference procedure failed on {len(broken)} task(s): {'; '.join(problems)}"
                 if problems else f"{source} ran on all {len(outcomes)} rows",
                 tasks=[b["task"] for b in broken], failures=broken[:_MAX_DETAIL])]
    task_ids = sorted({x["task"] for x in contradictions})
    out.append(check("labels.reference_procedure", not contradictions,
                     f"labels contradict the reference procedure on {len(task_ids)} task(s) (ids {shown(task_ids, 20)}): "
                     + "; ".join(f"task {x['task']} {x['column']}: reference {x['reference']!r}, CSV {x['csv']!r}"
                                 for x in contradictions[:_EXAMPLES])
                     if contradictions else f"every label agrees with {source}", tasks=task_ids,
                     contradictions=contradictions[:_MAX_DETAIL]))
    if hidden_diff:
        ids = sorted({x["task"] for x in hidden_diff})
        out.append(check("labels.reference_hidden", False,
                         f"hidden columns differ from the reference procedure's values on {len(ids)} task(s): "
                         + "; ".join(f"task {x['task']} {x['column']}: reference {x['reference']!r}, CSV {x['csv']!r}"
                                     for x in hidden_diff[:_EXAMPLES]), tasks=ids, differences=hidden_diff[:_MAX_DETAIL]))
    return out
