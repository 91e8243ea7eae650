"""Build a ``RunSummary``: one row per stage with its latest attempt, checks and LLM spend."""

from __future__ import annotations

from collections import defaultdict

from . import queries as q
from .records import RunRecord, RunSummary, StageRunRecord, StageSummary


def build_summary(con: q.Con, run: RunRecord) -> RunSummary:
    """Summarise ``run`` from an open connection.

    LLM spend is taken from ``llm_calls`` rather than from the stage-run columns, which are
    only filled when an attempt finishes: a summary shown while a stage runs is then live.

    Args:
        con: Any connection (read-only is enough).
        run: The run to summarise.

    Returns:
        Stages in the order they first started, with totals for the whole run.
    """
    attempts: dict[str, list[StageRunRecord]] = defaultdict(list)
    for stage_run in q.stage_runs_for(con, run.id):  # ordered by start time
        attempts[stage_run.stage].append(stage_run)

    latest = {stage: max(rows, key=lambda r: r.attempt) for stage, rows in attempts.items()}
    artifact_ids = [r.artifact_id for r in latest.values() if r.artifact_id]

    artifacts = {a.id: a for a in q.artifacts_where(con, "list_contains(?, id)", [artifact_ids])} \
        if artifact_ids else {}
    checks = {
        artifact_id: (passed, failed)
        for artifact_id, passed, failed in con.execute(
            "SELECT artifact_id, count(*) FILTER (WHERE passed), count(*) FILTER (WHERE NOT passed) "
            "FROM validations WHERE list_contains(?, artifact_id) GROUP BY artifact_id",
            [artifact_ids]).fetchall()
    } if artifact_ids else {}
    spend = {
        stage: (n, tin, tout, cost, cached)
        for stage, n, tin, tout, cost, cached in con.execute(
            "SELECT stage, count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
            "coalesce(sum(cost_usd), 0), coalesce(sum(cached_tokens), 0) FROM llm_calls WHERE run_id = ? GROUP BY stage",
            [run.id]).fetchall()
    }

    stages = []
    for stage, rows in attempts.items():
        last = latest[stage]
        artifact = artifacts.get(last.artifact_id) if last.artifact_id else None
        passed, failed = checks.get(last.artifact_id, (0, 0)) if last.artifact_id else (0, 0)
        n, tin, tout, cost, cached = spend.get(stage, (0, 0, 0, 0.0, 0))
        # A stage still marked running in a run whose process is gone will never finish.
        status = "interrupted" if last.status == "running" and run.status == "interrupted" else last.status
        stages.append(StageSummary(
            stage=stage, status=status, attempts=len(rows), artifact_id=last.artifact_id,
            artifact_version=artifact.version if artifact else None,
            artifact_status=artifact.status if artifact else None,
            checks_passed=passed, checks_failed=failed, llm_calls=n, input_tokens=tin,
            output_tokens=tout, cached_tokens=cached, cost_usd=float(cost), error=last.error,
        ))

    totals = [sum(values) for values in zip(*spend.values())] if spend else [0, 0, 0, 0.0, 0]
    return RunSummary(run=run, stages=stages, llm_calls=totals[0], input_tokens=totals[1],
                      output_tokens=totals[2], cost_usd=float(totals[3]))
