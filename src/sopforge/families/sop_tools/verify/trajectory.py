"""The trajectory scorer: outputs, final state, forbidden writes, order and unnecessary calls of one agent.

Deterministic code, used by the oracle and the baseline agents now and by agent evaluation later.
Every judgement compares an agent's :class:`Trajectory` with its task's computed expectations:

* **outputs**: each decision field equals the expected label after SOP-Bench's normalisation
  (lower-case, trimmed, ``_``/``-`` as spaces); the harness's lenient matcher is reported beside it;
* **final state** (τ²-bench): the records the agent created or changed equal the expected state
  diff, i.e. what the reference's calls leave on a fresh Manager. A record the expected state does
  not hold is a **forbidden write** (the SOP does not allow it on this task's branch), an expected
  record with other values a **wrong write**, an expected record never written a **missing write**;
* **order**: ``Task.order_constraints`` lists ``[a, b]``: a must be called (successfully) before
  the first successful call of b. Calling b with no a before it is one violation;
* **unnecessary calls**: calls beyond the expected multiset of tools (reads the SOP skips on this
  branch, repeats, distractors), and **missing calls**, the expected ones never made.

Order constraints come from executing the reference procedure (:func:`order_constraints`): on a
task's path, ``a`` precedes ``b`` when the API graph puts ``a`` upstream of ``b`` (data, state or
temporal dependency), and every read precedes every write that follows it on the path, because
a write records a decision and the decision rests on what was read before it. Everything else may
happen in any order (two independent look-ups, two records written on the same branch).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.ground_truth import Task, csv_cell
from sopforge.families.sop_tools.models.trajectory import AgentReport, Trajectory, TrajectoryScore, state_entries
from sopforge.families.sop_tools.verify.ground_truth_checks import json_equal

__all__ = ["MAX_FAILING", "NULL_LIKE", "harness_match", "normalize_answer", "order_constraints", "score_agent",
           "score_trajectory", "strict_match"]

# SOP-Bench treats these predictions as equal to a missing expected value (sopbench_format.md §3.3).
NULL_LIKE = frozenset({"", "none", "null", "na", "n/a", "nan", "unknown"})
MAX_FAILING = 10


def normalize_answer(value: Any) -> str:
    """Normalise a label the way SOP-Bench compares it: lower-case, trimmed, ``_``/``-`` as spaces."""
    text = csv_cell(value) if not isinstance(value, str) else value
    return " ".join(text.strip().lower().replace("_", " ").replace("-", " ").split())


def harness_match(predicted: Any, expected: Any) -> bool:
    """SOP-Bench's lenient matcher: null-likes equal each other, else equal or one contains the other."""
    p, e = normalize_answer(predicted), normalize_answer(expected)
    if e in NULL_LIKE or p in NULL_LIKE:
        return e in NULL_LIKE and p in NULL_LIKE
    return p == e or p in e or e in p


def strict_match(predicted: Any, expected: Any) -> bool:
    """Equal after normalisation, with no substring leniency."""
    return normalize_answer(predicted) == normalize_answer(expected)


def order_constraints(path: list[str], graph: APIGraph) -> list[list[str]]:
    """The ``[before, after]`` tool pairs the SOP orders on one expected path (see the module docstring).

    Args:
        path: Tool names of the reference's calls, in order (a tool counts at its first call).
        graph: The API graph (dependencies; which APIs write).

    Returns:
        Pairs in path order; tools outside the graph (none on a valid path) are ordered by nothing.
    """
    import networkx as nx  # loaded by the check, not by every command that loads the family

    g = graph.to_networkx()
    writes = {a.api_name for a in graph.write_apis}
    tools = list(dict.fromkeys(path))
    pairs = []
    for i, a in enumerate(tools):
        for b in tools[i + 1:]:
            upstream = a in g and b in g and nx.has_path(g, a, b)
            if upstream or (b in writes and a not in writes):
                pairs.append([a, b])
    return pairs


def _write_problems(expected: dict[str, Any], got: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    forbidden = [key for key in got if key not in expected]
    missing = [key for key in expected if key not in got]
    wrong = []
    for key in expected:
        if key in got and not json_equal(got[key], expected[key]):
            old, new = expected[key], got[key]
            if isinstance(old, dict) and isinstance(new, dict):
                fields = [f for f in dict.fromkeys([*old, *new]) if not json_equal(old.get(f), new.get(f))]
                wrong.append(f"{key}: {', '.join(fields)}")
            else:
                wrong.append(key)
    return forbidden, wrong, missing


def score_trajectory(task: Task, trajectory: Trajectory) -> TrajectoryScore:
    """Judge one trajectory against its task (pure; the caller replays the calls to get the state).

    Args:
        task: The task with its computed expectations (outputs, path, state, order).
        trajectory: The agent's calls, the state diff they left (None when the tools keep no
            state) and its answer.

    Returns:
        The score; ``success`` needs outputs, state and order all right.
    """
    outputs = task.expected_outputs
    answer = trajectory.answer
    strict = bool(outputs) and all(k in answer and strict_match(answer[k], v) for k, v in outputs.items())
    loose = bool(outputs) and all(k in answer and harness_match(answer[k], v) for k, v in outputs.items())
    if trajectory.state_diff is None:
        state_correct, forbidden, wrong, missing = None, [], [], []
    else:
        forbidden, wrong, missing = _write_problems(state_entries(task.expected_state),
                                                    state_entries(trajectory.state_diff))
        state_correct = not (forbidden or wrong or missing)
    done = [c.tool for c in trajectory.calls if c.error is None]
    violations = []
    for before, after in task.order_constraints:
        if after not in done:
            continue
        if before not in done[: done.index(after)]:
            violations.append(f"{after} before {before}")
    expected = Counter(task.expected_path or [c.tool for c in task.expected_calls])
    made = Counter(c.tool for c in trajectory.calls)
    unnecessary = [tool for tool, n in (made - expected).items() for _ in range(n)]
    missing_calls = [tool for tool, n in (expected - Counter(done)).items() for _ in range(n)]
    return TrajectoryScore(
        task_id=task.task_id, outputs_correct=strict, outputs_harness=loose, state_correct=state_correct,
        forbidden_writes=forbidden, wrong_writes=wrong, missing_writes=missing, order_violations=violations,
        unnecessary_calls=unnecessary, missing_calls=missing_calls,
        failed_calls=sum(1 for c in trajectory.calls if c.error is not None))


def score_agent(agent: str, tasks: list[Task], trajectories: list[Trajectory], *,
                description: str = "") -> AgentReport:
    """Score an agent's trajectories (one per task, matched by task id) and aggregate.

    Raises:
        ValueError: A task has no trajectory.
    """
    by_id = {t.task_id: t for t in trajectories}
    missing = [t.task_id for t in tasks if t.task_id not in by_id]
    if missing:
        raise ValueError(f"{agent}: no trajectory for task(s) {', '.join(missing[:5])}")
    scores = [score_trajectory(task, by_id[task.task_id]) for task in tasks]
    n = len(scores)
    stateful = [s for s in scores if s.state_correct is not None]

    def share(count: int, of: int) -> float:
        return round(count / of, 4) if of else 0.0

    return AgentReport(
        agent=agent, description=description, n_tasks=n, outputs=share(sum(s.outputs_correct for s in scores), n),
        final_state=share(sum(bool(s.state_correct) for s in stateful), len(stateful)) if stateful else None,
        order=share(sum(s.order_ok for s in scores), n), success=share(sum(s.success for s in scores), n),
        forbidden_write_tasks=sum(bool(s.forbidden_writes) for s in scores),
        mean_calls=round(sum(len(by_id[t.task_id].calls) for t in tasks) / n, 3) if n else 0.0,
        mean_unnecessary_calls=round(sum(len(s.unnecessary_calls) for s in scores) / n, 3) if n else 0.0,
        failing=[s for s in scores if not s.success][:MAX_FAILING])
