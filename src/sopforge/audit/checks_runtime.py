"""§9 items 8–9, judged from calls made in the sandbox (never in this process; see ``exercise.py``).

* **Calls**: every tool on every row; each call must succeed, return JSON, and return fields
  equal to the CSV cells of the same name. A call that stops its process is reported with its
  tool, which is left out while the others go on.
* **Stubs**: a tool whose results are all empty, or identical across rows with different
  arguments (an error when the CSV holds different values for a returned field).
* **Synthesized arguments**: a call with made-up values is not expected to succeed or to
  reproduce the CSV, except where the probes show the tool ignores every made-up value: its
  disagreement with the CSV is then the tool's own (a parity rule instead of a look-up).
* **Labels**: with a reference procedure (``run_procedure(manager, case)``), its decisions on
  each row's input columns must equal the output columns; contradicting task ids are listed.

Inputs and determinism (probes, the second run) are judged in ``checks_behaviour``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sopforge.audit.checks_data import hidden_columns, shown
from sopforge.audit.exercise import Exercise
from sopforge.audit.loader import FolderContents
from sopforge.audit.values import cell_matches
from sopforge.checks import CheckResult, check
from sopforge.sandbox import CallOutcome, SandboxResult

__all__ = ["check_calls", "check_reference", "outcome_key", "process_failure", "reference_calls", "result_key"]

_EXAMPLES = 5
_MAX_DETAIL = 200


def _grouped(items: list[dict], key, example) -> str:
    """'tool: N row(s), e.g. <example of the first>' per group, in first-seen order."""
    groups: dict[str, list[dict]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return "; ".join(f"{k}: {len(v)} row(s), e.g. {example(v[0])}" for k, v in list(groups.items())[:_EXAMPLES])


def result_key(value: Any) -> str:
    """A canonical text of a JSON value (key order ignored)."""
    return json.dumps(value, sort_keys=True, default=repr)


def outcome_key(outcome: CallOutcome) -> str:
    """What a call came to, as text: its result, or the exception it raised."""
    if not outcome.ok:
        return f"raised {outcome.error.type if outcome.error else ''}: {outcome.error.message if outcome.error else ''}"
    return result_key(outcome.result) if outcome.json_ok else f"unencodable {outcome.unencodable}"


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


def _stopped(ex: Exercise) -> list[CheckResult]:
    """Tools whose call stopped the sandbox process (each left out, the others went on)."""
    out = []
    for name, kinds in (("runtime.guard", {"policy_violation"}), ("runtime.completes", None)):
        hits = [f for f in ex.failures if (f.kind in kinds if kinds else f.kind != "policy_violation")]
        if hits:
            out.append(check(name, False, "calls that stopped their sandbox process (the tool was left out and the "
                             "other tools ran on): " + "; ".join(
                                 f"{f.tool} on task {f.task}: {f.kind}: {f.message[:160]}" for f in hits[:_EXAMPLES]),
                             tools=sorted({f.tool for f in hits}), tasks=sorted({f.task for f in hits}),
                             failures=[{"tool": f.tool, "task": f.task, "kind": f.kind, "message": f.message[:300]}
                                       for f in hits]))
    return out


def check_calls(c: FolderContents, ex: Exercise, ignored: dict[str, set[str]]) -> list[CheckResult]:
    """Judge the base calls: success, JSON, CSV agreement, stubs, leakage, unknown-tool handling.

    Args:
        c: the folder as read.
        ex: the calls made and their outcomes.
        ignored: per tool, the parameters its results were shown not to depend on (the probes).
    """
    if ex.load_failure is not None:
        return [process_failure(ex.load_failure, "loading tools.py in the sandbox")]  # type: ignore[list-item]
    out = [check("runtime.tools_load", True, "tools.py loads and its Manager() instantiates in the sandbox"),
           *_stopped(ex)]
    headers, outputs, records = set(c.header), set(c.output_columns), c.records
    raised, made_up_raised, unencodable, not_object, mismatches = [], [], [], [], []
    leaked: dict[str, set[str]] = defaultdict(set)
    per_tool: dict[str, list[tuple[int, str, Any]]] = defaultdict(list)  # tool -> (task, input key, result)
    n_calls = 0
    for i in ex.base:
        call, outcome = ex.calls[i], ex.outcomes.get(i)
        if outcome is None:
            continue
        n_calls += 1
        # Made-up values count as the tool's own only where the probes show it ignores every one of them.
        own = not call.made_up or set(call.made_up) <= ignored.get(call.tool, set())
        if not outcome.ok:
            err = outcome.error
            entry = {"task": call.task, "tool": call.tool, "error": f"{err.type}: {err.message[:160]}" if err else "raised"}
            (raised if not call.made_up else made_up_raised).append(entry)
            continue
        if not outcome.json_ok:
            unencodable.append({"task": call.task, "tool": call.tool, "where": outcome.unencodable})
            continue
        value = outcome.result
        per_tool[call.tool].append((call.task, result_key(call.input), value))
        if not isinstance(value, dict):
            not_object.append(call.tool)
            continue
        record = records[call.task]
        for fld, returned in value.items():
            if fld in outputs:
                leaked[call.tool].add(fld)
            if own and fld in headers and not cell_matches(returned, record.get(fld, "")):
                mismatches.append({"task": call.task, "tool": call.tool, "field": fld, "returned": returned,
                                   "csv": record.get(fld, ""), "made_up": list(call.made_up)})
    out.append(check("runtime.calls_succeed", not raised,
                     f"{len(raised)} of {n_calls} call(s) with the row's own values raised: "
                     + _grouped(raised, lambda r: r["tool"], lambda r: f"task {r['task']}: {r['error']}")
                     if raised else f"all {n_calls - len(made_up_raised)} calls with the row's own values returned",
                     calls=raised[:_MAX_DETAIL], tasks=sorted({r["task"] for r in raised}),
                     tools=sorted({r["tool"] for r in raised})))
    if made_up_raised:
        out.append(check("runtime.synthesized_calls", True,
                         f"{len(made_up_raised)} call(s) with synthesized arguments raised (expected when a tool checks "
                         "values the CSV does not hold): " + _grouped(
                             made_up_raised, lambda r: r["tool"], lambda r: f"task {r['task']}: {r['error']}"),
                         calls=made_up_raised[:_MAX_DETAIL]))
    out.append(check("runtime.json_encodable", not unencodable,
                     f"{len(unencodable)} result(s) json.dumps cannot encode (the whole task fails in the harness): "
                     + _grouped(unencodable, lambda u: u["tool"], lambda u: f"task {u['task']}: {u['where']}")
                     if unencodable else "every result is JSON-encodable", calls=unencodable[:_MAX_DETAIL]))
    out.append(check("runtime.tool_matches_csv", not mismatches,
                     f"{len(mismatches)} returned value(s) differ from the CSV cell of the same name (the tool "
                     "ignores or contradicts its data): " + _grouped(
                         mismatches, lambda m: f"{m['tool']}.{m['field']}",
                         lambda m: f"task {m['task']} returned {m['returned']!r}, CSV has {m['csv']!r}"
                         + (f" (its result ignores the synthesized {', '.join(m['made_up'])})" if m["made_up"] else ""))
                     if mismatches else "every returned field that is a CSV column equals the row's cell",
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
    probe = ex.unknown_tool
    if probe is not None:
        out.append(check("runtime.unknown_tool_raises", not probe.ok,
                         f"calling an unknown tool name returned {probe.result!r} instead of raising ValueError"
                         if probe.ok else "an unknown tool name raises", severity="warning"))
    return out


def _stub_checks(per_tool: dict[str, list[tuple[int, str, Any]]], records: list[dict[str, str]]) -> list[CheckResult]:
    stubs, ignores, constant = [], [], []
    for tool, calls in per_tool.items():
        if all(_empty(v) for _, _, v in calls):
            stubs.append((tool, sorted({t for t, _, _ in calls})))
            continue
        inputs = {k for _, k, _ in calls}
        values = {result_key(v) for _, _, v in calls}
        if len(inputs) < 2 or len(values) != 1:
            continue
        value = calls[0][2]
        varying = [f for f in (value if isinstance(value, dict) else {})
                   if f in records[0] and len({records[t][f] for t, _, _ in calls}) > 1]
        tasks = sorted({t for t, _, _ in calls})
        (ignores if varying else constant).append((tool, len(inputs), varying, value, tasks))
    out = [check("runtime.tool_stub", not stubs,
                 "tools that return nothing ({}, None or empty) for every row: " + "; ".join(
                     f"{t} (tasks {shown(tasks, 10)})" for t, tasks in stubs)
                 if stubs else "no tool returns only empty results", tools=[t for t, _ in stubs],
                 tasks={t: tasks for t, tasks in stubs})]
    out.append(check("runtime.tool_ignores_input", not ignores,
                     "tools return the same result for every row although the CSV differs: " + "; ".join(
                         f"{t} returns {result_key(v)[:80]} for {n} distinct inputs ({', '.join(f)} varies in the CSV)"
                         for t, n, f, v, _ in ignores) if ignores else "tool results vary with their data",
                     tools=[t for t, *_ in ignores], tasks={t: tasks for t, *_, tasks in ignores}))
    if constant:
        out.append(check("runtime.tool_constant", False, "tools return one constant result for all inputs (check "
                         "they are not stubs): " + "; ".join(
                             f"{t} returns {result_key(v)[:60]} for {n} distinct inputs (tasks {shown(tasks, 8)})"
                             for t, n, _, v, tasks in constant),
                         severity="warning", tools=[t for t, *_ in constant],
                         tasks={t: tasks for t, *_, tasks in constant}))
    return out


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
