"""Call every tool of a folder on every row in the sandbox, one tool's failure never stopping the others.

Three kinds of call (each a :class:`PlannedCall`):

* **base calls**, every tool on every row: the oracle's arguments for tools the CSV can feed
  (``checks_specs.build_oracle_calls``), and for the others the row's cells, fields other tools
  returned on the row, and values synthesized from the toolspec (``synth.py``);
* **probes**, on a few rows: one parameter of a base call changed alone, to see which inputs a
  tool's result depends on;
* the **second run** of the base calls, in a fresh process and in reverse order (determinism).

Calls run one per group, so when a call kills its process (a guard violation, a crash, a time
or memory limit), the calls before it are kept, its tool is reported and left out, and a fresh
process goes on with the calls after it. Tools that fail the static policy are never called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.audit.loader import FolderContents, ToolSpecView
from sopforge.audit.synth import alternative, synthesize
from sopforge.audit.values import coerce_cell
from sopforge.sandbox import CallOutcome, SandboxLimits, SandboxResult, run_in_sandbox

__all__ = ["PROBE_TOOL", "Exercise", "PlannedCall", "ToolFailure", "exercise_tools"]

PROBE_TOOL = "sopforgeAuditNoSuchTool"
PROBE_ROWS = 12  # rows whose base calls are varied one parameter at a time


@dataclass
class PlannedCall:
    """One tool call the audit makes."""

    task: int
    tool: str
    input: dict[str, Any]
    made_up: tuple[str, ...] = ()  # parameters synthesized from the toolspec
    chained: tuple[str, ...] = ()  # parameters taken from another tool's result on the row
    varied: str | None = None  # probes: the parameter changed
    base: int | None = None  # probes: index of the base call it varies


@dataclass
class ToolFailure:
    """A call that stopped its sandbox process; its tool was left out of the rest of the run."""

    tool: str
    task: int
    kind: str
    message: str


@dataclass
class Exercise:
    """Everything the runtime checks judge."""

    calls: list[PlannedCall] = field(default_factory=list)
    outcomes: dict[int, CallOutcome] = field(default_factory=dict)  # call index -> first-run outcome
    second: dict[int, CallOutcome] | None = None  # base call index -> second-run outcome
    failures: list[ToolFailure] = field(default_factory=list)
    second_failures: list[ToolFailure] = field(default_factory=list)
    load_failure: SandboxResult | None = None  # tools.py could not even load (no call ran)
    unknown_tool: CallOutcome | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def base(self) -> list[int]:
        return [i for i, c in enumerate(self.calls) if c.varied is None]

    @property
    def probes(self) -> list[int]:
        return [i for i, c in enumerate(self.calls) if c.varied is not None]


def _unique_specs(c: FolderContents) -> dict[str, ToolSpecView]:
    specs: dict[str, ToolSpecView] = {}
    for s in c.specs:
        if isinstance(s.name, str) and s.name not in specs and isinstance(s.schema, dict):
            specs[s.name] = s
    return specs


def _empty(cell: str) -> bool:
    return cell.strip() == ""


def _row_outputs(ex: Exercise) -> dict[int, dict[str, Any]]:
    """Per row, the fields its calls returned so far (the first tool that returned a name wins)."""
    rows: dict[int, dict[str, Any]] = {}
    for i, call in enumerate(ex.calls):
        outcome = ex.outcomes.get(i)
        if call.varied is None and outcome is not None and outcome.ok and isinstance(outcome.result, dict):
            fields = rows.setdefault(call.task, {})
            for key, value in outcome.result.items():
                fields.setdefault(key, value)
    return rows


def _fed_calls(c: FolderContents, rows: dict[int, dict[str, Any]], spec: ToolSpecView) -> list[PlannedCall]:
    """Base calls of a tool the CSV alone cannot feed: row cells, chained fields, synthesized values."""
    headers, props = set(c.header), spec.properties
    calls = []
    for task, record in enumerate(c.records):
        if any(r in headers and _empty(record.get(r, "")) for r in spec.required):
            continue  # an empty required cell: no agent could call it on this row
        outputs, args, made_up, chained = rows.get(task, {}), {}, [], []
        for p in dict.fromkeys(spec.required):
            if p in headers:
                args[p] = coerce_cell(record[p], props.get(p))
            elif p in outputs:
                args[p], _ = outputs[p], chained.append(p)
            else:
                args[p], _ = synthesize(p, props.get(p), task), made_up.append(p)
        for p in props:
            if p not in args and p in headers and not _empty(record.get(p, "")):
                args[p] = coerce_cell(record[p], props.get(p))
        calls.append(PlannedCall(task, spec.name, args, tuple(made_up), tuple(chained)))
    return calls


def _probes(ex: Exercise, specs: dict[str, ToolSpecView]) -> list[PlannedCall]:
    """Each parameter of each tool changed alone on the first rows: another row's value, or a synthesized one."""
    by_tool: dict[str, list[int]] = {}
    for i in ex.base:
        by_tool.setdefault(ex.calls[i].tool, []).append(i)
    probes = []
    for tool, indices in by_tool.items():
        spec = specs.get(tool)
        props = spec.properties if spec else {}
        for n, i in enumerate(indices[:PROBE_ROWS]):
            base = ex.calls[i]
            for p, value in base.input.items():
                others = [ex.calls[j].input.get(p) for j in indices[n + 1:] + indices[:n]]
                alt = next((o for o in others if o != value and p not in base.made_up), None)
                if alt is None:
                    alt = alternative(p, props.get(p), base.task, value)
                if alt is None:
                    continue
                probes.append(PlannedCall(base.task, tool, {**base.input, p: alt}, base.made_up, base.chained,
                                          varied=p, base=i))
    return probes


def _run(folder: Path, ex: Exercise, indices: list[int], *, limits: SandboxLimits | None, drop: tuple[str, ...],
         skip_policy: bool) -> tuple[dict[int, CallOutcome], list[ToolFailure], SandboxResult | None]:
    """Run calls one per group; a call that stops the process leaves its tool out of a fresh process's rest."""
    outcomes: dict[int, CallOutcome] = {}
    failures: list[ToolFailure] = []
    pending = list(indices)
    while pending:
        groups = [[{"tool": PROBE_TOOL, "input": {}}]] + [
            [{"tool": ex.calls[i].tool, "input": ex.calls[i].input}] for i in pending]
        result = run_in_sandbox(folder, "tools.py", {"op": "call_tools", "groups": groups}, limits=limits,
                                exclude=drop, skip_policy=skip_policy, policy_mode="published")
        got: list[list[CallOutcome]] = result.results  # type: ignore[assignment]
        if not got:
            return outcomes, failures, result  # it died loading tools.py or building the Manager
        if ex.unknown_tool is None and got[0]:
            ex.unknown_tool = got[0][0]
        for j, outs in enumerate(got[1:]):
            if outs:
                outcomes[pending[j]] = outs[0]
        done = len(got) - 1
        if result.ok or done >= len(pending):
            break
        culprit = ex.calls[pending[done]]
        failures.append(ToolFailure(culprit.tool, culprit.task, result.error_kind or "crash",
                                    result.error_message or result.stderr_tail.strip()[-200:]))
        pending = [i for i in pending[done + 1:] if ex.calls[i].tool != culprit.tool]
    return outcomes, failures, None


def exercise_tools(c: FolderContents, csv_groups: list[list[dict]], *, blocked: set[str],
                   limits: SandboxLimits | None = None, drop: tuple[str, ...] = (),
                   skip_policy: bool = False) -> Exercise:
    """Call every tool that is not ``blocked`` on every row (twice), plus the probes.

    Args:
        c: the folder as read.
        csv_groups: the oracle's calls per row (tools the CSV alone can feed).
        blocked: tools never to call (they fail the static policy).
        limits: sandbox limits of each process.
        drop: files left out of the sandbox copy (a reference procedure that fails the policy).
        skip_policy: the caller already judged the code (per tool) and blocked what fails.
    """
    import time

    ex = Exercise()
    specs = _unique_specs(c)
    for task, group in enumerate(csv_groups):
        for call in group:
            if call["tool"] not in blocked:
                ex.calls.append(PlannedCall(task, call["tool"], dict(call["input"])))
    fed = {call["tool"] for group in csv_groups for call in group}
    started = time.perf_counter()
    outcomes, failures, load = _run(c.path, ex, ex.base, limits=limits, drop=drop, skip_policy=skip_policy)
    ex.outcomes.update(outcomes)
    ex.failures += failures
    ex.timings["csv_tools"] = round(time.perf_counter() - started, 3)
    if load is not None:
        ex.load_failure = load
        return ex
    first_round, rows = len(ex.calls), _row_outputs(ex)
    for name, spec in specs.items():
        if name not in fed and name not in blocked:
            ex.calls += _fed_calls(c, rows, spec)
    ex.calls += _probes(ex, specs)
    failed = {f.tool for f in ex.failures}
    started = time.perf_counter()
    rest = [i for i in range(first_round, len(ex.calls)) if ex.calls[i].tool not in failed]
    outcomes, failures, load = _run(c.path, ex, rest, limits=limits, drop=drop, skip_policy=skip_policy)
    ex.outcomes.update(outcomes)
    ex.failures += failures
    ex.timings["other_tools_and_probes"] = round(time.perf_counter() - started, 3)
    failed |= {f.tool for f in failures}
    again = [i for i in reversed(ex.base) if i in ex.outcomes and ex.calls[i].tool not in failed]
    if again:
        started = time.perf_counter()
        second, failures, load = _run(c.path, ex, again, limits=limits, drop=drop, skip_policy=skip_policy)
        ex.second, ex.second_failures = second, failures
        if load is not None:
            ex.second_failures.append(ToolFailure("(tools.py)", -1, load.error_kind or "crash", load.error_message))
        ex.timings["second_run"] = round(time.perf_counter() - started, 3)
    return ex
