"""The consequences of the reference procedure's calls: expected final states, tool values, paths and baselines.

Once the reference procedure has run on every row (:mod:`sopforge.families.sop_tools.verify.ground_truth`),
one more sandbox process replays, each case as on a fresh Manager (one Manager per kind of plan, each
plan of a kind another case, see :func:`~sopforge.families.sop_tools.verify.replay.replay_plans`):

1. every task's expected calls, literally (τ²-bench: the reference actions on a fresh environment).
   The records they leave are the task's **expected state**; every call must return what it
   returned during the procedure, or the tools depend on something other than their arguments;
2. every read on every row, arguments chained from the row: what the tools return for the case
   whatever the branch. These are the hidden intermediate values of the export (the audit calls
   every tool on every row and compares with the CSV);
3. with ``gates``: the baseline agents' plans (:mod:`sopforge.families.sop_tools.verify.baselines`).

Then the path coverage table and the checks that the branches matter
(:mod:`sopforge.families.sop_tools.verify.paths`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.ground_truth import Task
from sopforge.families.sop_tools.models.trajectory import AgentReport, PathRow
from sopforge.families.sop_tools.verify.baselines import (
    REPLAYED, baseline_check, baseline_plans, majority_answer, score_baselines,
)
from sopforge.families.sop_tools.verify.ground_truth_checks import json_equal
from sopforge.families.sop_tools.verify.paths import path_checks, path_table, write_checks
from sopforge.families.sop_tools.verify.replay import (
    ReplayRun, argument_sources, chain_plan, literal_plan, pooled, replay_plans,
)
from sopforge.families.sop_tools.verify.tool_common import typed_row
from sopforge.sandbox import SandboxLimits

__all__ = ["DEFAULT_GATES", "Consequences", "replay_consequences"]

DEFAULT_GATES = {"min_distinct_paths": 4, "max_baseline_state_success": 0.5}
_QUOTED = 3


@dataclass
class Consequences:
    """Tasks with their expected state and tool values, the path table, the baselines and the checks."""

    tasks: list[Task]
    checks: list[CheckResult] = field(default_factory=list)
    paths: list[PathRow] = field(default_factory=list)
    baselines: list[AgentReport] = field(default_factory=list)


def _tool_values(run: ReplayRun) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for call in run.calls:
        if isinstance(call.get("output"), dict):
            values.update(call["output"])
    return values


def _replay_check(tasks: list[Task], runs: list[ReplayRun]) -> CheckResult:
    differ = []
    for task, run in zip(tasks, runs, strict=True):
        if not run.ok:
            differ.append(f"{task.task_id}: the replay failed ({run.error})")
            continue
        for expected, got in zip(task.expected_calls, run.calls, strict=True):
            if "error" in got or not json_equal(got.get("output"), expected.output):
                shown = got.get("error") or got.get("output")
                differ.append(f"{task.task_id}: {expected.tool} returned {shown!r} on a fresh Manager, "
                              f"{expected.output!r} during the procedure")
                break
    return check("ground_truth.replay_reproduces", not differ,
                 "replaying the expected calls on a fresh Manager gives other results: " + "; ".join(differ[:_QUOTED])
                 + "; tool results must depend only on their arguments and the case's record" if differ
                 else f"the expected calls of all {len(tasks)} tasks reproduce on a fresh Manager",
                 tasks=[d.split(":", 1)[0] for d in differ][:20])


def replay_consequences(folder: Path, tasks: list[Task], rows: list[dict[str, Any]], schema: DataSchema,
                        graph: APIGraph, input_columns: list[str], *, gates: dict[str, float] | None = None,
                        limits: SandboxLimits | None = None) -> Consequences:
    """Replay the tasks' calls, every read and (with ``gates``) the baselines; judge what follows.

    Args:
        folder: The bundle (tools.py and the CSV of existing fields).
        tasks: Tasks from the procedure's run (expected calls set; states and intermediates not yet).
        rows: The dataset rows, in order (``Task.row_index`` points into them).
        schema: The data schema (intermediate fields; types of the row values).
        graph: The API graph (read order, writes, when conditions).
        input_columns: The columns the agent sees (baselines chain their arguments from them).
        gates: ``min_distinct_paths`` and ``max_baseline_state_success``; None skips paths and baselines.
        limits: Sandbox limits of the replay process.

    Returns:
        The tasks with ``expected_state`` and the intermediate values in ``hidden``, and the checks.
    """
    if not tasks:
        return Consequences(tasks=[])
    intermediate = [f.name for f in schema.to_be_obtained if not f.decision]
    reads = [n for n in graph.topological_order() if not graph.api(n).writes]
    every_field = argument_sources(graph, [f.name for f in schema.existing])
    expected = [literal_plan([c.model_dump() for c in t.expected_calls]) for t in tasks]
    values = [chain_plan(typed_row(rows[t.row_index], schema), reads, every_field) for t in tasks]
    answer = majority_answer(tasks)
    baselines = baseline_plans(tasks, graph, input_columns, answer) if gates is not None else {}
    plans = expected + values + [p for agent in REPLAYED for p in baselines.get(agent, [])]
    # One Manager per kind of plan: every plan of a kind is another case, so each sees its case as a fresh
    # Manager would (writes touch only their own case), without reading the CSV once per plan.
    kinds = (pooled("expected", len(expected)) + pooled("values", len(values))
             + [name for agent in REPLAYED for name in pooled(agent, len(baselines.get(agent, [])))])
    result, runs = replay_plans(folder, plans, fresh=kinds, limits=limits)
    if not result.ok or len(runs) < len(plans):
        return Consequences(tasks=tasks, checks=[check(
            "ground_truth.replay_reproduces", False, f"replaying the tasks' calls failed ({result.error_kind}): "
            f"{result.error_message}", error_kind=result.error_kind)])
    n = len(tasks)
    done = []
    for task, state_run, value_run in zip(tasks, runs[:n], runs[n:2 * n], strict=True):
        found = _tool_values(value_run)
        done.append(task.model_copy(update={
            "expected_state": state_run.state_diff or {},
            "hidden": {**task.hidden, **{c: found.get(c) for c in intermediate}}}))
    checks = [_replay_check(tasks, runs[:n]), *write_checks(done, graph, intermediate)]
    out = Consequences(tasks=done, checks=checks)
    if gates is None:
        return out
    out.paths = path_table(done, graph)
    checks += path_checks(done, graph, out.paths, min_paths=int(gates["min_distinct_paths"]))
    replayed = {agent: runs[2 * n + i * n: 2 * n + (i + 1) * n] for i, agent in enumerate(REPLAYED)}
    stateful = any(r.stateful for r in runs[:n])
    out.baselines = score_baselines(done, replayed, answer, stateful=stateful)
    checks.append(baseline_check(out.baselines, float(gates["max_baseline_state_success"])))
    return out
