"""What a tool's results depend on: its inputs (the probes) and nothing else (the second run).

* **Inputs**: a probe changes one parameter of a base call alone. A parameter whose changes
  never change the result, on every probed row, is one the tool ignores: a warning (a look-up
  whose text argument is never read is a published defect), and the evidence that lets a
  mismatch on made-up values count as the tool's own (``checks_runtime``).
* **Determinism**: the base calls run again in a fresh process, rows in reverse order. A result
  that differs is an error (randomness, the clock, or state leaking between rows), said to
  change a label when the field is an output column; a result that differs only in the order of
  list items is a warning, since an answer compared as a set is unaffected (a shuffled list of
  tool specs that no tool returns changes nothing and is not reported at all).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sopforge.audit.checks_data import shown
from sopforge.audit.checks_runtime import outcome_key, result_key
from sopforge.audit.exercise import Exercise
from sopforge.audit.loader import FolderContents
from sopforge.checks import CheckResult, check

__all__ = ["check_determinism", "check_inputs", "ignored_parameters"]

_EXAMPLES = 5
_MAX_DETAIL = 200
_MIN_PROBES = 2  # probes a parameter needs before it is said to be ignored


def ignored_parameters(ex: Exercise) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]]]:
    """Per tool, the parameters no probe could change the result with; and the probed tasks of each."""
    same: dict[tuple[str, str], list[int]] = defaultdict(list)
    changed: set[tuple[str, str]] = set()
    for i in ex.probes:
        probe = ex.calls[i]
        base, varied = ex.outcomes.get(probe.base), ex.outcomes.get(i)  # type: ignore[arg-type]
        if base is None or varied is None or not base.ok:
            continue
        key = (probe.tool, probe.varied or "")
        if outcome_key(base) == outcome_key(varied):
            same[key].append(probe.task)
        else:
            changed.add(key)
    ignored: dict[str, set[str]] = defaultdict(set)
    evidence = {}
    for key, tasks in same.items():
        if key not in changed and len(tasks) >= _MIN_PROBES:
            ignored[key[0]].add(key[1])
            evidence[key] = tasks
    return dict(ignored), evidence


def check_inputs(ex: Exercise, evidence: dict[tuple[str, str], list[int]]) -> list[CheckResult]:
    """A warning per parameter that no probe could change the result with."""
    if not ex.probes:
        return []
    items = sorted(evidence.items())
    return [check("runtime.tool_ignores_param", not items,
                  "tool results that do not depend on a parameter (each changed alone, the result stayed the same; "
                  "check the tool reads it): " + "; ".join(
                      f"{tool}.{param} (tasks {shown(sorted(set(tasks)), 8)})" for (tool, param), tasks in items[:10])
                  if items else f"every probed parameter changes its tool's result ({len(ex.probes)} probes)",
                  severity="warning", parameters=[f"{t}.{p}" for (t, p), _ in items],
                  tasks={f"{t}.{p}": sorted(set(tasks)) for (t, p), tasks in items})]


def _canonical(value: Any) -> Any:
    """The value with every list sorted (by its items' JSON text): equal when only order differs."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True, default=repr))
    return value


def _fields(a: Any, b: Any) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(k for k in set(a) | set(b) if result_key(a.get(k)) != result_key(b.get(k)))
    return []


def check_determinism(c: FolderContents, ex: Exercise) -> list[CheckResult]:
    """Compare the first run with a fresh one in reverse row order: values that change, order that changes."""
    if ex.second is None:
        return []
    outputs = set(c.output_columns)
    values, orders = [], []
    compared = 0
    for i in ex.base:
        first, second = ex.outcomes.get(i), ex.second.get(i)
        if first is None or second is None:
            continue
        compared += 1
        a, b = outcome_key(first), outcome_key(second)
        if a == b:
            continue
        call = ex.calls[i]
        if first.ok and second.ok and result_key(_canonical(first.result)) == result_key(_canonical(second.result)):
            orders.append({"task": call.task, "tool": call.tool, "fields": _fields(first.result, second.result)})
            continue
        fields = _fields(first.result, second.result) if first.ok and second.ok else []
        values.append({"task": call.task, "tool": call.tool, "fields": fields,
                       "labels": sorted(set(fields) & outputs), "first": a[:200], "second": b[:200]})
    for f in ex.second_failures:
        values.append({"task": f.task, "tool": f.tool, "fields": [], "labels": [], "first": "returned",
                       "second": f"{f.kind}: {f.message[:160]}"})
    out = [check("runtime.deterministic", not values,
                 f"{len(values)} call(s) returned a different value in a second fresh process (rows in reverse order; "
                 "randomness, the clock or state carried between rows): " + _by_tool(values)
                 + "; derive every value from the row's data" if values
                 else f"a second fresh process reproduced all {compared} results",
                 calls=values[:_MAX_DETAIL], tools=sorted({v["tool"] for v in values}),
                 tasks=sorted({v["task"] for v in values}),
                 labels=sorted({col for v in values for col in v["labels"]}))]
    if orders:
        out.append(check("runtime.order_stable", False,
                         f"{len(orders)} result(s) list the same items in another order in a second run (harmless "
                         "unless the order is graded): " + _by_tool(orders), severity="warning",
                         calls=orders[:_MAX_DETAIL], tools=sorted({o["tool"] for o in orders})))
    return out


def _by_tool(items: list[dict]) -> str:
    groups: dict[str, list[dict]] = {}
    for item in items:
        groups.setdefault(item["tool"], []).append(item)
    parts = []
    for tool, hits in list(groups.items())[:_EXAMPLES]:
        fields = sorted({f for h in hits for f in h["fields"]})
        labels = sorted({f for h in hits for f in h.get("labels", [])})
        example = hits[0]
        text = f"{tool}: {len(hits)} row(s) (tasks {shown(sorted({h['task'] for h in hits}), 8)})"
        if fields:
            text += f", field(s) {', '.join(fields[:6])}"
        if labels:
            text += f", which change(s) the label column(s) {', '.join(labels)}"
        if "first" in example:
            text += f", e.g. task {example['task']}: {example['first'][:70]} vs {example['second'][:70]}"
        parts.append(text)
    return "; ".join(parts)
