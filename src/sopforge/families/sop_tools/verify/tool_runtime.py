"""Runtime checks of the tools stage: the tools run on every row in a sandboxed child (two processes in all).

How runtime arguments are built (:func:`argument_sources`): an input comes from the row when
the graph marks it ``user_input`` or when no upstream API returns it; otherwise it is taken from
the result of the nearest upstream API (in topological order) that returns it, as an agent that
sees only the input columns must do. So a tool that returns ``"24"`` for an integer breaks its
consumers here exactly as it would for an agent. Since a sandbox payload is static, the chain is
run by a small driver module written next to ``tools.py`` (:data:`DRIVER_SOURCE`): each row is one
``run_function`` call whose plan names, per step, literal arguments and references to earlier
results. After the chain, the first tool is called again with the same arguments (write-back
state), and one extra call per tool that takes an identifier repeats the first row's chain and
then calls that tool with every identifier replaced by :data:`UNKNOWN_ID` (it must raise).

Determinism: the same calls run in a second fresh process with the rows in **reverse order**, and
every result is compared exactly. Reversing costs nothing and also catches results that depend on
earlier calls (a counter, a cache with too short a key), which differ between tasks run in another
order. The sandbox pins ``PYTHONHASHSEED=0``, so iteration over a set of strings is stable across
the two runs and is *not* caught at run time (a limitation of the current sandbox); the static
``tools.code.set_order`` warning catches the plain cases (``for x in {...}``, ``list(set(...))``).
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path
from typing import Any

import networkx as nx

from sopforge.parsing import one_line
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, row_label
from sopforge.families.sop_tools.models.tools import ToolCode, ToolSpecs, csv_cell
from sopforge.sandbox import CallOutcome, SandboxLimits, SandboxResult, run_in_sandbox
from sopforge.families.sop_tools.verify.tool_common import CSV_FILE, _few, _Findings, _result, _short, typed_row
from sopforge.families.sop_tools.verify.tool_judging import _judge_probes, _judge_rows

__all__ = [
    "DRIVER_FILE", "DRIVER_SOURCE", "TOOL_CHECK_LIMITS", "UNKNOWN_ID", "argument_sources", "check_runtime",
    "write_bundle",
]

DRIVER_FILE = "_sopforge_chain.py"
UNKNOWN_ID = "ZZ-NOT-ON-FILE-000000"
_UNKNOWN_INT_ID = -999999
# Tighter than the sandbox default: a pandas-free tools.py runs thousands of rows in well under a second.
TOOL_CHECK_LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
_HINTS = {
    "timeout": "every tool must return quickly: no unbounded loops, waits or retries",
    "cpu_limit": "every tool must return quickly: no unbounded loops or repeated scans of the table",
    "memory_limit": "keep memory small: load the CSV once and build no unbounded lists or copies",
    "policy_violation": "tools may only read their own CSV: no network, processes, environment or writes",
    "load_error": "tools.py must import cleanly and its Manager must construct with no arguments, "
                  f"reading {CSV_FILE} next to tools.py",
    "crash": "tools.py must not exit the interpreter or touch file descriptors",
    "bad_output": "tools.py must not exit the interpreter or write to stdout's descriptor",
}

DRIVER_SOURCE = '''\
"""sopforge tool-check driver: runs one planned chain of tool calls and returns every result.

Written next to tools.py for the runtime checks only; never part of an exported bundle.
"""

import json


def _snapshot(value):
    try:
        return json.loads(json.dumps(value)), None
    except (TypeError, ValueError):
        pass
    if isinstance(value, dict):
        for key, item in value.items():
            try:
                json.dumps(item)
            except (TypeError, ValueError):
                return None, str(key) + " holds a " + type(item).__name__
    return None, "a " + type(value).__name__


def run_chain(tools, steps):
    done = []
    for step in steps:
        entry = {"tool": step["tool"]}
        if "same_as" in step:
            base = done[step["same_as"]]
            if "input" not in base:
                entry["skipped"] = ["(the call it repeats was skipped)"]
                done.append(entry)
                continue
            args = dict(base["input"])
            args.update(step.get("override", {}))
        else:
            args = dict(step["args"])
            missing = []
            for param, ref in step["refs"].items():
                earlier = done[ref[0]].get("result")
                if isinstance(earlier, dict) and ref[1] in earlier:
                    args[param] = earlier[ref[1]]
                else:
                    missing.append(param)
            if missing:
                entry["skipped"] = missing
                done.append(entry)
                continue
        entry["input"] = json.loads(json.dumps(args))
        value = tools.process_tool_call(step["tool"], args)
        entry["result"], problem = _snapshot(value)
        if problem is not None:
            entry["unencodable"] = problem
        done.append(entry)
    return done
'''


def write_bundle(folder: Path, dataset: Dataset, code: ToolCode, specs: ToolSpecs | None = None) -> Path:
    """Write a generation-time bundle: the CSV of existing fields, tools.py and (optionally) toolspecs.json.

    Args:
        folder: Target folder (created if missing).
        dataset: Rows; columns are ``dataset.fields`` spelled by :func:`csv_cell`.
        code: The tools.py source.
        specs: The toolspecs, written as toolspecs.json when given.

    Returns:
        The folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / CSV_FILE).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(dataset.fields)
        writer.writerows([csv_cell(row.get(f)) for f in dataset.fields] for row in dataset.rows)
    (folder / "tools.py").write_text(code.source, encoding="utf-8")
    if specs is not None:
        (folder / "toolspecs.json").write_text(specs.to_json(), encoding="utf-8")
    return folder


def argument_sources(graph: APIGraph, columns: list[str]) -> dict[str, dict[str, str | None]]:
    """Where each API input comes from at run time: ``"row"``, an upstream API name, or None (nowhere).

    An input is read from the row when the graph marks it ``user_input`` or no upstream API returns
    it; otherwise from the nearest upstream producer in topological order.
    """
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
            if p.source != "user_input" and producer is not None:
                sources[name][p.name] = producer
            else:
                sources[name][p.name] = "row" if p.name in columns else None
    return sources


def _id_params(specs: ToolSpecs, name: str, schema: DataSchema, id_field: str | None) -> dict[str, Any]:
    fields = {f.name: f for f in schema.existing}
    out = {}
    for p in specs.properties(name):
        f = fields.get(p)
        if f is not None and (p == id_field or p == "id" or p.endswith("_id")) and f.type in ("string", "integer"):
            out[p] = UNKNOWN_ID if f.type == "string" else _UNKNOWN_INT_ID
    return out


def _chain(typed: dict[str, Any], order: list[str], sources: dict[str, dict[str, str | None]]) -> list[dict]:
    steps, index = [], {}
    for name in order:
        args, refs = {}, {}
        for param, source in sources[name].items():
            if source == "row":
                args[param] = typed[param]
            elif source is not None:
                refs[param] = [index[source], param]
        index[name] = len(steps)
        steps.append({"tool": name, "args": args, "refs": refs})
    return steps


def _run(folder: Path, calls: list[dict], limits: SandboxLimits) -> SandboxResult:
    payload = {"op": "run_function", "function": "run_chain", "tools_entry": "tools.py", "calls": calls}
    return run_in_sandbox(folder, DRIVER_FILE, payload, limits=limits)


def _sandbox_failure(result: SandboxResult, labels: list[str], run: str) -> CheckResult:
    kind = result.error_kind or "crash"
    running = labels[result.completed] if result.completed < len(labels) else "after the last call"
    hint = _HINTS.get(kind, "")
    return check("tools.runtime.sandbox", False,
                 f"the {run} sandbox run stopped with {kind} ({one_line(result.error_message, 160)}) while running "
                 f"{running}; {hint}", error_kind=kind, completed=result.completed, wall_seconds=result.wall_seconds,
                 stderr_tail=result.stderr_tail[-2000:])


def _fingerprint(outcome: CallOutcome) -> Any:
    err = outcome.error.model_dump() if outcome.error else None
    return {"ok": outcome.ok, "result": outcome.result, "error": err}


def check_runtime(code: ToolCode, specs: ToolSpecs, graph: APIGraph, schema: DataSchema, dataset: Dataset, *,
                  limits: SandboxLimits = TOOL_CHECK_LIMITS) -> list[CheckResult]:
    """Run every tool on every row in the sandbox (two processes) and judge the results.

    Args:
        code: tools.py; must already pass :func:`check_code_static`.
        specs: The accepted toolspecs (used for the unknown-id probes and argument validation).
        graph: The API graph (call order and argument sources).
        schema: The data schema (field types, decisions).
        dataset: All rows; every one is run.
        limits: Sandbox limits of each of the two processes.

    Returns:
        ``tools.runtime.sandbox`` and, when the first run completed, ``.calls_succeed``,
        ``.results_shape``, ``.result_keys``, ``.no_decision_fields``, ``.result_types``,
        ``.matches_data``, ``.not_constant``, ``.unknown_id_raises``, ``.deterministic`` and the
        ``.idempotent`` and ``.arguments_valid`` warnings.
    """
    order = graph.topological_order()
    sources = argument_sources(graph, dataset.fields)
    rows = [typed_row(r, schema) for r in dataset.rows]
    labels = [row_label(r, i, dataset.id_field) for i, r in enumerate(dataset.rows)]
    plans = [_chain(t, order, sources) + [{"tool": order[0], "same_as": 0}] for t in rows]
    probes = []
    if rows:
        base = plans[0][:-1]
        for i, name in enumerate(order):
            override = _id_params(specs, name, schema, dataset.id_field)
            if override:
                probes.append((name, base + [{"tool": name, "same_as": i, "override": override}]))
    call_labels = labels + [f"the unknown-id probe of {name}" for name, _ in probes]
    forward = [{"args": [p]} for p in plans] + [{"args": [p]} for _, p in probes]
    backward = [{"args": [p]} for p in reversed(plans)] + [{"args": [p]} for _, p in probes]
    with tempfile.TemporaryDirectory(prefix="sopforge-tools-") as tmp:
        folder = write_bundle(Path(tmp), dataset, code)
        (folder / DRIVER_FILE).write_text(DRIVER_SOURCE, encoding="utf-8")
        first = _run(folder, forward, limits)
        second = _run(folder, backward, limits) if first.ok else None
    timing = {"rows": len(rows), "calls_per_row": len(order) + 1, "probes": len(probes),
              "first_run_seconds": first.wall_seconds, "second_run_seconds": second.wall_seconds if second else None,
              "peak_rss_bytes": first.peak_rss_bytes, "layers": first.layers}
    if not first.ok:
        return [_sandbox_failure(first, call_labels, "first")]
    if second is not None and not second.ok:
        reversed_labels = list(reversed(labels)) + call_labels[len(labels):]
        return [_sandbox_failure(second, reversed_labels, "second (rows in reverse order)")]
    results = [check("tools.runtime.sandbox", True, f"{len(rows)} rows x {len(order) + 1} calls and {len(probes)} "
                     f"probes ran twice in {first.wall_seconds + (second.wall_seconds if second else 0):.2f} s",
                     **timing)]
    outcomes: list[CallOutcome] = list(first.results)  # type: ignore[arg-type]
    results += _judge_rows(outcomes[:len(rows)], rows, labels, order, specs, graph, schema)
    results.append(_judge_probes(outcomes[len(rows):], probes))
    assert second is not None
    again: list[CallOutcome] = list(second.results)  # type: ignore[arg-type]
    again = list(reversed(again[:len(rows)])) + again[len(rows):]
    diffs = _Findings()
    for label, a, b in zip(call_labels, outcomes, again):
        fa, fb = _fingerprint(a), _fingerprint(b)
        if fa != fb:
            key, text = _first_difference(fa, fb)
            diffs.add(key, label, text)
    lines = diffs.lines()
    results.append(_result("tools.runtime.deterministic", lines, "results differ between two runs (the second ran the "
                           "rows in reverse order): " + _few(lines) + "; a result must depend only on its arguments "
                           "and the row, never on the clock, randomness or earlier calls",
                           "two runs gave identical results", differences=lines[:10], rows=diffs.rows))
    return results


def _first_difference(a: dict, b: dict) -> tuple[Any, str]:
    """(group key, text) of the first call whose outcome differs between the two runs."""
    ra, rb = a.get("result"), b.get("result")
    if a["ok"] and b["ok"] and isinstance(ra, list) and isinstance(rb, list):
        for x, y in zip(ra, rb):
            if x != y:
                tool = x.get("tool")
                return tool, f"{tool}: {_short(x.get('result'), 80)} then {_short(y.get('result'), 80)}"
    return None, f"{_short(a, 80)} then {_short(b, 80)}"
