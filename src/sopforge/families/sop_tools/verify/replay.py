"""Replay planned tool calls through a folder's ``tools.py`` in the sandbox, recording the database state.

Everything that judges a domain by running its tools goes through this one driver: the tools
stage's runtime checks, the reference stage (expected states on a fresh Manager, every read on
every row, the baseline agents), the oracle and the baselines on the exported folder.

A *plan* is one task's calls: ``[{"tool": name, "args": {...}, "refs": {param: [i, key]}}]``, where
a ref takes ``param`` from key ``key`` of the result of call ``i`` of the same plan (an agent that
sees only the input columns must chain results this way). :data:`DRIVER_SOURCE` is written next to
``tools.py`` (never exported) and runs each plan as one ``run_function`` call: on a fresh Manager
(τ²-bench's "replayed on a fresh environment") or on one Manager shared by every plan (as the
SOP-Bench harness does). A call that raises is recorded and the plan goes on, as an agent's
trajectory would; a ref to a result that lacks the key skips the call. After every call the
driver reads ``manager.database_state()`` and records what changed, so a read that writes, a write
that writes elsewhere, or a write that leaves nothing behind is visible per call.

Folders whose Manager has no ``database_state`` (published SOP-Bench folders) replay too: their
runs say ``stateful: False`` and carry no state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.trajectory import StateDiff, Trajectory, TrajectoryCall
from sopforge.sandbox import SandboxLimits, SandboxResult, run_in_sandbox

__all__ = ["DRIVER_FILE", "DRIVER_SOURCE", "POOL_SIZE", "STATE_METHOD", "ReplayRun", "argument_sources",
           "chain_plan", "literal_plan", "pooled", "replay_plans", "to_trajectory"]

DRIVER_FILE = "_sopforge_replay.py"
STATE_METHOD = "database_state"
# Plans per shared Manager. The driver reads the whole state after every call, so a Manager that
# accumulated the records of thousands of cases would make a replay quadratic; a new Manager reads the
# whole CSV, so one per plan would too. A pool of this many cases keeps both costs small.
POOL_SIZE = 50

DRIVER_SOURCE = '''\
"""sopforge replay driver: runs planned tool calls on the folder's Manager and records the database state.

Written next to tools.py by sopforge for its checks only; never part of an exported folder.
"""

import json

import tools as _tools_module

_shared = {}
_last_states = {}  # per shared Manager, the state its last plan ended with (a parsed copy)


def _manager_class():
    # The harness's rule: the alphabetically first public name ending in "Manager".
    names = sorted(n for n in dir(_tools_module) if n.endswith("Manager") and not n.startswith("_"))
    if not names:
        raise LookupError("tools.py defines no public name ending in 'Manager'")
    return getattr(_tools_module, names[0])


def _plain(value):
    try:
        return json.loads(json.dumps(value)), None
    except (TypeError, ValueError) as exc:
        if isinstance(value, dict):
            for key, item in value.items():
                try:
                    json.dumps(item)
                except (TypeError, ValueError):
                    return None, str(key) + " holds a " + type(item).__name__
        return None, str(exc)[:200]


def _state(manager, last=None):
    # A parsed copy of the Manager's state (it shares nothing with the Manager), or last itself when
    # nothing changed. Only what differs from last is copied: a pooled Manager's state grows with every
    # write, and copying all of it after every call was the replay's main cost.
    method = getattr(manager, "database_state", None)
    if method is None:
        return None
    raw = method()
    if last is not None and isinstance(raw, dict):
        try:
            value = _copy_changed(raw, last)
        except (TypeError, ValueError):
            value = None  # the whole copy below names what cannot be encoded
        if value is not None:
            return value
    value, problem = _plain(raw)
    if problem is not None or not isinstance(value, dict):
        raise TypeError("database_state() must return a dict of tables of JSON records" +
                        (": " + problem if problem else ""))
    return value


def _copy_changed(raw, last):
    # Equal here is what _diff compares. What JSON would write differently (tuples) is never equal and
    # is copied, as is NaN (JSON reads every NaN back as one object, so the copies compare equal).
    # Keys JSON would rename (numbers) take the whole copy instead (None).
    if not all(isinstance(table, str) for table in raw):
        return None
    value, unchanged = {}, len(raw) == len(last)
    for table, rows in raw.items():
        old = last.get(table)
        if table in last and rows == old:
            value[table] = old
            continue
        unchanged = False
        if isinstance(rows, dict) and isinstance(old, dict) and all(isinstance(key, str) for key in rows):
            value[table] = {key: old[key] if key in old and row == old[key] else json.loads(json.dumps(row))
                            for key, row in rows.items()}
        else:
            value[table] = json.loads(json.dumps(rows))
    return last if unchanged else value


def _diff(before, after):
    if before is None or after is None:
        return {}
    out = {}
    for table in sorted(set(before) | set(after)):
        old = before.get(table) or {}
        new = after.get(table) or {}
        if not isinstance(old, dict) or not isinstance(new, dict):
            out[table] = {"<table>": new}
            continue
        changed = {k: new.get(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}
        if changed:
            out[table] = changed
    return out


def replay(steps, instance):
    # True: a new Manager for this plan; False or a name: the Manager shared by every plan with that name.
    key = None
    if instance is True:
        manager = _manager_class()()
    else:
        key = "shared" if instance is False else str(instance)
        if key not in _shared:
            _shared[key] = _manager_class()()
        manager = _shared[key]
    start = before = _state(manager, _last_states.get(key))
    entries = []
    for step in steps:
        entry = {"tool": step["tool"]}
        args = dict(step.get("args", {}))
        missing = []
        for param, ref in step.get("refs", {}).items():
            earlier = entries[ref[0]].get("output") if ref[0] < len(entries) else None
            if isinstance(earlier, dict) and ref[1] in earlier:
                args[param] = earlier[ref[1]]
            else:
                missing.append(param)
        if missing:
            entry["skipped"] = missing
            entries.append(entry)
            continue
        entry["input"], _ = _plain(args)
        try:
            value = manager.process_tool_call(step["tool"], args)
        except Exception as exc:
            entry["error"] = type(exc).__name__ + ": " + str(exc)[:300]
        else:
            entry["output"], problem = _plain(value)
            if problem is not None:
                entry["unencodable"] = problem
        after = _state(manager, before)
        change = _diff(before, after) if after is not before else {}
        if change:
            entry["state_diff"] = change
        before = after
        entries.append(entry)
    records = sum(len(t) for t in start.values() if isinstance(t, dict)) if start is not None else 0
    if key is not None:
        _last_states[key] = before
    return {"calls": entries, "state_diff": _diff(start, before), "stateful": start is not None,
            "tables": sorted(start) if start is not None else [], "initial_records": records}
'''


@dataclass
class ReplayRun:
    """What one plan did: its calls (with outputs, errors and per-call state changes) and the state diff."""

    ok: bool
    error: str = ""
    too_large: int | None = None  # the plan's results exceeded the sandbox's result limit (their size in bytes)
    calls: list[dict[str, Any]] = field(default_factory=list)
    state_diff: StateDiff | None = None
    stateful: bool = False
    tables: list[str] = field(default_factory=list)
    initial_records: int = 0


def pooled(kind: str, count: int) -> list[str]:
    """Manager names for ``count`` plans of one kind: a new shared Manager every :data:`POOL_SIZE` plans."""
    return [f"{kind}:{i // POOL_SIZE}" for i in range(count)]


def literal_plan(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plan of recorded calls (``{"tool", "input"}``), every argument literal."""
    return [{"tool": c["tool"], "args": dict(c.get("input") or {})} for c in calls]


def _runs(result: SandboxResult, n: int) -> list[ReplayRun]:
    runs = []
    for outcome in result.results[:n]:
        if not outcome.ok:
            err = outcome.error
            runs.append(ReplayRun(ok=False, error=f"{err.type}: {err.message}" if err else "the driver raised"))
        elif outcome.omitted:
            runs.append(ReplayRun(ok=False, error=f"the results are too large ({outcome.result_bytes} bytes)",
                                  too_large=outcome.result_bytes))
        elif not outcome.json_ok or not isinstance(outcome.result, dict):
            runs.append(ReplayRun(ok=False, error="the replay result is not JSON"))
        else:
            body = outcome.result
            runs.append(ReplayRun(ok=True, calls=body["calls"], state_diff=body["state_diff"] if body["stateful"]
                                  else None, stateful=body["stateful"], tables=body["tables"],
                                  initial_records=body["initial_records"]))
    return runs


def replay_plans(folder: Path, plans: list[list[dict[str, Any]]], *, fresh: bool | str | list[bool | str] = True,
                 limits: SandboxLimits | None = None) -> tuple[SandboxResult, list[ReplayRun]]:
    """Run every plan through ``folder``'s tools.py in one sandbox process.

    Args:
        folder: A folder with tools.py and the CSV it reads (a bundle or an exported SOP-Bench folder).
        plans: One list of steps per task (see the module docstring).
        fresh: A new Manager per plan (True), one Manager for all plans in order (False), or one Manager per
            name (a string: plans with the same name share it). A list says it per plan (a fresh plan after
            shared ones sees what a new instance starts with). A new Manager reads the whole CSV, so for
            many plans a named Manager per kind of plan is much faster; it is as good as a fresh one when
            each plan of that name is a different case, since a write only touches its own case's records.
        limits: Sandbox limits of the process.

    Returns:
        The sandbox result (``ok`` False when the process itself failed) and one run per plan that
        completed, in order.
    """
    flags = fresh if isinstance(fresh, list) else [fresh] * len(plans)
    payload = {"op": "run_function", "function": "replay",
               "calls": [{"args": [p, f]} for p, f in zip(plans, flags, strict=True)]}
    # The runner stages the folder as data and writes the driver into its copy (never into the folder).
    result = run_in_sandbox(folder, DRIVER_FILE, payload, limits=limits, driver_source=DRIVER_SOURCE,
                            extra_files={DRIVER_FILE: DRIVER_SOURCE})
    return result, _runs(result, len(plans))


def to_trajectory(task_id: str, run: ReplayRun, answer: dict[str, Any]) -> Trajectory:
    """A replayed plan as a scorable trajectory (skipped calls were never made; a failed run made none)."""
    calls = [TrajectoryCall(tool=c["tool"], input=c.get("input") or {}, output=c.get("output"), error=c.get("error"),
                            state_diff=c.get("state_diff") or {})
             for c in run.calls if "skipped" not in c]
    return Trajectory(task_id=task_id, calls=calls, state_diff=run.state_diff if run.ok else {}, answer=answer)


# --------------------------------------------------------------------------------------- planning

def argument_sources(graph: APIGraph, columns: list[str]) -> dict[str, dict[str, str | None]]:
    """Where each API input comes from when the APIs are chained: ``"row"``, ``"decision"``, an upstream
    API name, or None (nowhere).

    An input is read from the row when the graph marks it ``user_input`` or no upstream API returns
    it; a write's ``decision`` input is the agent's decision; otherwise the input is taken from the
    result of the nearest upstream API (in topological order) that returns it, as an agent that sees
    only the ``columns`` must do.
    """
    import networkx as nx  # loaded by the check, not by every command that loads the family

    order = graph.topological_order()
    position = {n: i for i, n in enumerate(order)}
    g = graph.to_networkx()
    sources: dict[str, dict[str, str | None]] = {}
    for name in order:
        api = graph.api(name)
        upstream = sorted(nx.ancestors(g, name), key=position.__getitem__, reverse=True)
        sources[name] = {}
        for p in api.input_parameters:
            producer = next((u for u in upstream if p.name in graph.api(u).output_names), None)
            if p.source == "decision":
                sources[name][p.name] = "decision"
            elif p.source != "user_input" and producer is not None:
                sources[name][p.name] = producer
            else:
                sources[name][p.name] = "row" if p.name in columns else None
    return sources


def chain_plan(values: dict[str, Any], order: list[str], sources: dict[str, dict[str, str | None]],
               decisions: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One call per API of ``order``, arguments from ``values``, ``decisions`` or earlier results.

    An input with no source is left out (the tool then reports it, as it would to an agent).
    """
    steps: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for name in order:
        args, refs = {}, {}
        for param, source in sources[name].items():
            if source == "row" and param in values:
                args[param] = values[param]
            elif source == "decision" and decisions is not None and param in decisions:
                args[param] = decisions[param]
            elif source not in (None, "row", "decision") and source in index:
                refs[param] = [index[source], param]
        index[name] = len(steps)
        steps.append({"tool": name, "args": args, "refs": refs})
    return steps
