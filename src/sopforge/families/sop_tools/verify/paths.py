"""Path coverage: do the SOP's branches lead to different tool paths, and do writes follow the SOP?

Executing the reference procedure gives every task its expected tool path. This module turns the
paths into the coverage table (one row per distinct path, with its tasks, outcomes and writes)
and the checks that prove the branches matter:

* ``ground_truth.distinct_paths``: at least ``min_distinct_paths`` distinct paths (default 4);
* ``ground_truth.paths_cover_apis``: every API of the graph is on some task's path, i.e. every
  branch of the SOP that has its own action is the expected path of at least one task;
* ``ground_truth.writes_follow_sop``: a write happens on exactly the tasks whose values satisfy its
  ``when`` condition in the API graph (stated by the api_graph stage from the SOP, independently of
  the procedure). A write elsewhere is a write the SOP forbids on that branch; a missing one is an
  action the SOP requires.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sopforge.checks import CheckResult, check
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.ground_truth import Task, csv_cell
from sopforge.families.sop_tools.models.trajectory import PathRow

__all__ = ["MAX_TASK_IDS", "outcome_label", "path_checks", "path_table", "path_table_text", "path_values",
           "task_values", "write_checks"]

MAX_TASK_IDS = 5
_QUOTED = 4


def outcome_label(task: Task) -> str:
    """``field=value, field=value`` of the task's expected outputs (booleans as true/false)."""
    return ", ".join(f"{k}={csv_cell(v).lower() if isinstance(v, bool) else csv_cell(v)}"
                     for k, v in task.expected_outputs.items())


def task_values(task: Task) -> dict[str, Any]:
    """Every value of a task (inputs, hidden fields, intermediates, decisions), for ``when`` conditions."""
    return {**task.inputs, **task.hidden, **task.expected_outputs}


def path_table(tasks: list[Task], graph: APIGraph) -> list[PathRow]:
    """One row per distinct expected path, most common first (ties in first-seen order)."""
    writes = {a.api_name: a.writes_table for a in graph.write_apis}
    rows: dict[tuple[str, ...], PathRow] = {}
    for task in tasks:
        path = tuple(task.expected_path or [c.tool for c in task.expected_calls])
        row = rows.setdefault(path, PathRow(path=list(path), tasks=0, writes=list(dict.fromkeys(
            writes[t] for t in path if writes.get(t)))))
        row.tasks += 1
        if len(row.task_ids) < MAX_TASK_IDS:
            row.task_ids.append(task.task_id)
        label = outcome_label(task)
        if label not in row.outcomes:
            row.outcomes.append(label)
    return sorted(rows.values(), key=lambda r: -r.tasks)


def path_table_text(rows: list[PathRow]) -> str:
    """The coverage table as plain text, for messages and re-asks."""
    lines = [f"{len(rows)} distinct tool path(s):"]
    for i, row in enumerate(rows, 1):
        lines.append(f"P{i} ({row.tasks} task(s), e.g. {', '.join(row.task_ids[:2])}): {' -> '.join(row.path)}"
                     f" | writes: {', '.join(row.writes) or 'none'} | outcomes: {'; '.join(row.outcomes)}")
    return "\n".join(lines)


def path_checks(tasks: list[Task], graph: APIGraph, rows: list[PathRow], *, min_paths: int) -> list[CheckResult]:
    """``ground_truth.distinct_paths`` and ``ground_truth.paths_cover_apis``."""
    table = path_table_text(rows)
    called = {tool for row in rows for tool in row.path}
    unused = [n for n in graph.names if n not in called]
    return [
        check("ground_truth.distinct_paths", len(rows) >= min_paths,
              f"only {len(rows)} distinct tool path(s) over {len(tasks)} tasks, at least {min_paths} needed: every "
              "task calls the same tools, so a call-every-tool agent reproduces the path. Follow the SOP's branches: "
              "stop where a gate ends the procedure (no later look-ups), and make each branch's own calls and "
              f"writes only on that branch. {table}" if len(rows) < min_paths
              else f"{len(rows)} distinct tool paths (at least {min_paths} required)",
              distinct_paths=len(rows), minimum=min_paths, table=table),
        check("ground_truth.paths_cover_apis", not unused,
              f"APIs on no task's path: {', '.join(unused)}; the SOP steps they implement are never carried out "
              "(a branch with its own action that no task reaches, or a call the procedure forgets)" if unused
              else "every API of the graph is on some task's path", apis=unused),
    ]


def path_values(task: Task, computed: Collection[str]) -> dict[str, Any]:
    """The task's values as its own path knows them: a computed value only where a call on the path returned it.

    The consequences replay computes every intermediate on every row (the exported hidden columns),
    but a write's branch is decided by the values the procedure reached: a screening that ended at
    its first gate never classified the monitoring status, so a rule "write the PDMP review when the
    monitoring result is not_required" does not select it (the pharmacy demo's recorded evaluation
    and the permits trial both met this).
    """
    derived = {k for c in task.expected_calls if isinstance(c.output, dict) for k in c.output}
    return {k: v for k, v in task_values(task).items() if k not in computed or k in derived}


def write_checks(tasks: list[Task], graph: APIGraph, computed: Collection[str] = ()) -> list[CheckResult]:
    """``ground_truth.writes_follow_sop``: each write on exactly the tasks its ``when`` condition selects.

    Args:
        computed: The fields a tool computes (to be obtained, not decisions): see :func:`path_values`.
    """
    forbidden: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    for task in tasks:
        values = path_values(task, computed)
        path = task.expected_path or [c.tool for c in task.expected_calls]
        for api in graph.write_apis:
            allowed = api.allowed_on(values)
            if api.api_name in path and not allowed:
                forbidden.setdefault(api.api_name, []).append(task.task_id)
            elif allowed and api.api_name not in path:
                missing.setdefault(api.api_name, []).append(task.task_id)

    def listed(found: dict[str, list[str]], verb: str) -> list[str]:
        out = []
        for name, ids in found.items():
            rule = graph.api(name).when_text
            more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
            out.append(f"{name} {verb} on {', '.join(ids[:3])}{more} (the SOP writes it when {rule})")
        return out

    problems = listed(forbidden, "is called") + listed(missing, "is not called")
    return [check("ground_truth.writes_follow_sop", not problems,
                  "writes that do not follow the SOP's branches: " + "; ".join(problems[:_QUOTED])
                  + "; call each write tool exactly on the branch the SOP names for it, never on another"
                  if problems else f"every write happens exactly on its branch ({len(graph.write_apis)} write tools)",
                  forbidden={k: v[:20] for k, v in forbidden.items()}, missing={k: v[:20] for k, v in missing.items()})]
