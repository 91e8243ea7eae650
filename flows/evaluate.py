"""Prefect flow: evaluate agents on a generated domain (``sopforge eval``).

Composition only: the evaluation (created by ``sopforge eval``, a row of ``eval_runs``) is run by
``sopforge.orchestration.evaluation``: each item not yet done is a task run, the results are DuckDB
rows, and the leaderboard is published as a Prefect artifact.
Deployment entrypoint: ``flows/evaluate.py:evaluate``.
"""

from __future__ import annotations

from prefect import flow

from sopforge.orchestration.evaluation import run_evaluation


@flow(name="evaluate", flow_run_name="{eval_id}", persist_result=False, log_prints=True)
def evaluate(eval_id: str, home: str | None = None, retry_errors: bool = False) -> dict:
    """Run an evaluation's remaining items and report.

    Args:
        eval_id: id of a row in ``eval_runs``.
        home: SOPFORGE_HOME of the store, when not the default.
        retry_errors: run again the items stored with an error.

    Returns:
        The evaluation summary (tables per family, counts, cost, the results file).
    """
    return run_evaluation(eval_id, home, retry_errors)
