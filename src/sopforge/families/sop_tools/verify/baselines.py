"""Baseline agents, replayed through the tools: if one of them reaches the expected final state, the branches do not matter.

A benchmark of SOP adherence must not be solvable without following the SOP. Three agents that
never read the SOP are run through the same tools as the oracle, on a fresh Manager per task, and
scored by the trajectory scorer:

* ``call_every_tool``: every read and every write once, in the API graph's order, chaining results
  into later arguments, then the majority label of each decision field (it also records that label);
* ``read_only``: every read once and no write, then the majority label;
* ``majority_label``: no call at all, the majority label (the most common outcome, all decision
  fields together).

If any of them reaches the expected final state on more than ``max_baseline_state_success`` of the
tasks (default 0.5), the writes do not depend on the branch and the gate fails.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.errors import ValidationFailed
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.ground_truth import Task
from sopforge.families.sop_tools.models.trajectory import AgentReport, Trajectory
from sopforge.families.sop_tools.verify.replay import (
    ReplayRun, argument_sources, chain_plan, pooled, replay_plans, to_trajectory,
)
from sopforge.families.sop_tools.verify.trajectory import score_agent
from sopforge.sandbox import SandboxLimits

__all__ = ["BASELINE_AGENTS", "REPLAYED", "baseline_check", "baseline_plans", "majority_answer", "run_baselines",
           "score_baselines"]

BASELINE_AGENTS: dict[str, str] = {
    "call_every_tool": "calls every read and every write tool once in the API graph's order, then answers (and "
                       "records) the majority label",
    "read_only": "calls every read tool once and no write, then answers the majority label",
    "majority_label": "calls no tool and answers the most common outcome (every decision field together)",
}
REPLAYED = ("call_every_tool", "read_only")


def majority_answer(tasks: list[Task]) -> dict[str, Any]:
    """The most common expected outcome, all decision fields together (ties: the first seen).

    Taken jointly, not field by field: per-field majorities can form an outcome no task has
    (deny with no_blocking_issue), which would make the baseline weaker than it should be.
    """
    if not tasks:
        return {}
    counts = Counter(repr(sorted(t.expected_outputs.items())) for t in tasks)
    best = max(counts.values())
    return dict(next(t.expected_outputs for t in tasks if counts[repr(sorted(t.expected_outputs.items()))] == best))


def baseline_plans(tasks: list[Task], graph: APIGraph, input_columns: list[str],
                   answer: dict[str, Any]) -> dict[str, list[list[dict[str, Any]]]]:
    """The replayed baselines' plans, one per task: ``{"call_every_tool": [...], "read_only": [...]}``."""
    order = graph.topological_order()
    reads = [name for name in order if not graph.api(name).writes]
    sources = argument_sources(graph, input_columns)
    return {"call_every_tool": [chain_plan(t.inputs, order, sources, answer) for t in tasks],
            "read_only": [chain_plan(t.inputs, reads, sources) for t in tasks]}


def score_baselines(tasks: list[Task], runs: dict[str, list[ReplayRun]], answer: dict[str, Any],
                    stateful: bool = True) -> list[AgentReport]:
    """Score the three baselines: the replayed two from ``runs``, and majority_label with no call."""
    reports = []
    for agent, description in BASELINE_AGENTS.items():
        if agent in runs:
            trajectories = [to_trajectory(t.task_id, run, answer) for t, run in zip(tasks, runs[agent], strict=True)]
        else:
            trajectories = [Trajectory(task_id=t.task_id, state_diff={} if stateful else None, answer=answer)
                            for t in tasks]
        reports.append(score_agent(agent, tasks, trajectories, description=description))
    return reports


def baseline_check(reports: list[AgentReport], bound: float, name: str = "ground_truth.baselines") -> CheckResult:
    """Error when a baseline reaches the expected final state on more than ``bound`` of the tasks."""
    over = [r for r in reports if r.final_state is not None and r.final_state > bound]
    stateless = [r.agent for r in reports if r.final_state is None]
    shown = "; ".join(f"{r.agent}: outputs {r.outputs:.2f}, final state "
                      + ("n/a" if r.final_state is None else f"{r.final_state:.2f}") for r in reports)
    if stateless:
        return check(name, False, f"the tools keep no database state, so no final state can be scored ({shown}); "
                     "the SOP's actions must be write tools", bound=bound, baselines=[r.line() for r in reports])
    return check(name, not over,
                 f"baseline agents that ignore the SOP reach the expected final state on more than {bound:.2f} of "
                 f"the tasks ({', '.join(r.agent for r in over)}): {shown}; the writes must depend on the branch "
                 "(a record only on its branch, early exits that skip later actions)" if over
                 else f"no baseline reaches the expected final state on more than {bound:.2f} of the tasks ({shown})",
                 bound=bound, baselines={r.agent: {"outputs": r.outputs, "final_state": r.final_state,
                                                   "order": r.order} for r in reports})


def run_baselines(folder: Path, tasks: list[Task], graph: APIGraph, input_columns: list[str], *,
                  limits: SandboxLimits | None = None) -> list[AgentReport]:
    """Replay the baselines through ``folder``'s tools (one Manager per agent, each task another case) and score them.

    Raises:
        ValidationFailed: The replay process itself failed (the folder's tools do not run).
    """
    answer = majority_answer(tasks)
    plans = baseline_plans(tasks, graph, input_columns, answer)
    flat = [p for agent in REPLAYED for p in plans[agent]]
    result, runs = replay_plans(folder, flat, fresh=[name for agent in REPLAYED for name in pooled(agent, len(tasks))],
                                limits=limits)
    if not result.ok or len(runs) < len(flat):
        raise ValidationFailed(f"the baseline agents could not be replayed ({result.error_kind}): "
                               f"{result.error_message}")
    n = len(tasks)
    replayed = {agent: runs[i * n:(i + 1) * n] for i, agent in enumerate(REPLAYED)}
    return score_baselines(tasks, replayed, answer, stateful=any(r.stateful for r in runs))
