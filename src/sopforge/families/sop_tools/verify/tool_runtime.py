"""Runtime checks of the tools stage: the tools run on every row in a sandboxed child (two processes in all).

How runtime arguments are built (:func:`~sopforge.families.sop_tools.verify.replay.argument_sources`): an
input comes from the row when the graph marks it ``user_input`` or when no upstream API returns it;
otherwise it is taken from the result of the nearest upstream API (in topological order) that
returns it, as an agent that sees only the input columns must do. A write's decision inputs take
the decision labels in turn, row by row, so every label is recorded somewhere. So a tool that
returns ``"24"`` for an integer breaks its consumers here exactly as it would for an agent. Each
row is one plan of the replay driver (:mod:`sopforge.families.sop_tools.verify.replay`), run on a
Manager shared with other rows (a pool of them), as the SOP-Bench harness shares one. After the chain, the first tool is
called again with the same arguments (idempotence), and one extra plan per tool that takes an
identifier repeats the first row's chain and then calls that tool with every identifier replaced
by :data:`UNKNOWN_ID` (it must raise).

State (the simulated database): after every call the driver reads ``database_state()``. A read
must change nothing; a write must store exactly its arguments as the one record of its case in its
``writes_table`` and return that record's id; a fresh Manager, made after every row has written,
must start with the graph's tables and no record (anything else lives outside the instance).

Determinism: the same calls run in a second fresh process with the rows in **reverse order**, and
every result and every state change is compared exactly. Reversing costs nothing and also catches
results that depend on earlier calls (a counter, a record id drawn from a sequence, a cache with
too short a key), which differ between tasks run in another order. The sandbox pins
``PYTHONHASHSEED=0``, so iteration over a set of strings is stable across the two runs and is *not*
caught at run time (a limitation of the current sandbox); the static ``tools.code.set_order``
warning catches the plain cases (``for x in {...}``, ``list(set(...))``).
"""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path
from typing import Any

from sopforge.parsing import one_line
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, row_label
from sopforge.families.sop_tools.models.tools import ToolCode, ToolSpecs, csv_cell
from sopforge.sandbox import SandboxLimits, SandboxResult
from sopforge.families.sop_tools.verify.replay import (
    ReplayRun, argument_sources, chain_plan, pooled, replay_plans,
)
from sopforge.families.sop_tools.verify.tool_common import CSV_FILE, _few, _Findings, _result, _short, typed_row
from sopforge.families.sop_tools.verify.tool_judging import judge_probes, judge_rows, judge_state

__all__ = [
    "TOOL_CHECK_LIMITS", "UNKNOWN_ID", "argument_sources", "check_runtime", "decision_rotation", "write_bundle",
]

UNKNOWN_ID = "ZZ-NOT-ON-FILE-000000"
_UNKNOWN_INT_ID = -999999
# Tighter than the sandbox default: a pandas-free tools.py runs thousands of rows in well under a second.
TOOL_CHECK_LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
_HINTS = {
    "timeout": "every tool must return quickly: no unbounded loops, waits or retries",
    "cpu_limit": "every tool must return quickly: no unbounded loops or repeated scans of the table",
    "memory_limit": "keep memory small: load the CSV once and build no unbounded lists or copies",
    "policy_violation": "tools may only read their own CSV: no network, processes, environment or writes; a write "
                        "tool changes only the Manager's in-memory tables, never a file",
    "load_error": "tools.py must import cleanly and its Manager must construct with no arguments, "
                  f"reading {CSV_FILE} next to tools.py",
    "crash": "tools.py must not exit the interpreter or touch file descriptors",
    "bad_output": "tools.py must not exit the interpreter or write to stdout's descriptor",
}


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


def decision_rotation(schema: DataSchema, index: int) -> dict[str, Any]:
    """A label per decision field for row ``index``, in turn, so every label is written somewhere."""
    out: dict[str, Any] = {}
    for f in schema.decisions:
        labels = f.labels()
        label = labels[index % len(labels)] if labels else ""
        out[f.name] = (label == "true") if f.type == "boolean" else label
    return out


def _id_params(specs: ToolSpecs, name: str, schema: DataSchema, id_field: str | None) -> dict[str, Any]:
    fields = {f.name: f for f in schema.existing}
    out = {}
    for p in specs.properties(name):
        f = fields.get(p)
        if f is not None and (p == id_field or p == "id" or p.endswith("_id")) and f.type in ("string", "integer"):
            out[p] = UNKNOWN_ID if f.type == "string" else _UNKNOWN_INT_ID
    return out


def _probe_step(step: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    return {"tool": step["tool"], "args": {**step["args"], **override},
            "refs": {k: v for k, v in step["refs"].items() if k not in override}}


def _sandbox_failure(result: SandboxResult, labels: list[str], run: str) -> CheckResult:
    kind = result.error_kind or "crash"
    running = labels[result.completed] if result.completed < len(labels) else "after the last call"
    hint = _HINTS.get(kind, "")
    name = "tools.state.outside_memory" if kind == "policy_violation" and "for writing" in result.error_message \
        else "tools.runtime.sandbox"
    return check(name, False,
                 f"the {run} sandbox run stopped with {kind} ({one_line(result.error_message, 160)}) while running "
                 f"{running}; {hint}", error_kind=kind, completed=result.completed, wall_seconds=result.wall_seconds,
                 stderr_tail=result.stderr_tail[-2000:])


def _fingerprint(run: ReplayRun) -> str:
    # The size of an oversized result varies with how many records the shared Manager holds: not a difference.
    error = "too large" if run.too_large is not None else run.error
    return json.dumps([run.ok, error, run.calls, run.state_diff], sort_keys=True, default=repr)


def check_runtime(code: ToolCode, specs: ToolSpecs, graph: APIGraph, schema: DataSchema, dataset: Dataset, *,
                  limits: SandboxLimits = TOOL_CHECK_LIMITS) -> list[CheckResult]:
    """Run every tool on every row in the sandbox (two processes) and judge the results and the state.

    Args:
        code: tools.py; must already pass :func:`check_code_static`.
        specs: The accepted toolspecs (used for the unknown-id probes and argument validation).
        graph: The API graph (call order, argument sources, which APIs write where).
        schema: The data schema (field types, decisions).
        dataset: All rows; every one is run.
        limits: Sandbox limits of each of the two processes.

    Returns:
        ``tools.runtime.sandbox`` and, when the first run completed, ``.calls_succeed``,
        ``.results_shape``, ``.result_keys``, ``.no_decision_fields``, ``.result_types``,
        ``.matches_data``, ``.not_constant``, ``.unknown_id_raises``, ``.deterministic``, the
        ``.idempotent`` and ``.arguments_valid`` warnings, and the ``tools.state.*`` checks.
    """
    order = graph.topological_order()
    sources = argument_sources(graph, dataset.fields)
    rows = [typed_row(r, schema) for r in dataset.rows]
    labels = [row_label(r, i, dataset.id_field) for i, r in enumerate(dataset.rows)]
    chains = [chain_plan(t, order, sources, decision_rotation(schema, i)) for i, t in enumerate(rows)]
    plans = [chain + [dict(chain[0])] for chain in chains]
    probes = []
    if rows:
        for i, name in enumerate(order):
            override = _id_params(specs, name, schema, dataset.id_field)
            if override:
                probes.append((name, chains[0] + [_probe_step(chains[0][i], override)]))
    fresh_probe: list[dict] = []  # a new Manager after every row has written: it must start empty
    call_labels = labels + [f"the unknown-id probe of {name}" for name, _ in probes] + ["a fresh Manager"]
    forward = plans + [p for _, p in probes] + [fresh_probe]
    backward = plans[::-1] + [p for _, p in probes] + [fresh_probe]
    flags = pooled("rows", len(plans)) + ["probes"] * len(probes) + [True]
    with tempfile.TemporaryDirectory(prefix="sopforge-tools-") as tmp:
        folder = write_bundle(Path(tmp), dataset, code)
        first, runs = replay_plans(folder, forward, fresh=flags, limits=limits)
        second, again = replay_plans(folder, backward, fresh=flags, limits=limits) if first.ok else (None, [])
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
    row_runs = runs[:len(rows)]
    results += judge_rows(row_runs, rows, labels, order, specs, graph, schema)
    results.append(judge_probes(runs[len(rows):len(rows) + len(probes)], probes))
    results += judge_state(row_runs, runs[-1], labels, graph, schema, dataset.id_field)
    again = list(reversed(again[:len(rows)])) + again[len(rows):]
    diffs = _Findings()
    for label, a, b in zip(call_labels, runs, again):
        if _fingerprint(a) != _fingerprint(b):
            key, text = _first_difference(a, b)
            diffs.add(key, label, text)
    lines = diffs.lines()
    results.append(_result("tools.runtime.deterministic", lines, "results differ between two runs (the second ran the "
                           "rows in reverse order): " + _few(lines) + "; a result, a record and its id must depend "
                           "only on the arguments and the row, never on the clock, randomness, counters or earlier "
                           "calls", "two runs gave identical results and records", differences=lines[:10],
                           rows=diffs.rows))
    return results


def _first_difference(a: ReplayRun, b: ReplayRun) -> tuple[Any, str]:
    """(group key, text) of the first call whose outcome or state change differs between the two runs."""
    for x, y in zip(a.calls, b.calls):
        if x != y:
            tool = x.get("tool")
            what = "wrote" if x.get("state_diff") != y.get("state_diff") else "returned"
            shown_x = x.get("state_diff") if what == "wrote" else x.get("output", x.get("error"))
            shown_y = y.get("state_diff") if what == "wrote" else y.get("output", y.get("error"))
            return tool, f"{tool} {what} {_short(shown_x, 80)} then {_short(shown_y, 80)}"
    return None, f"{_short(a.state_diff, 80)} then {_short(b.state_diff, 80)}"
