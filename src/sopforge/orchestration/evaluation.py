"""The evaluate flow's work on Prefect: every item of an evaluation as a task run, then the leaderboard.

Items are submitted to the flow's task runner (a thread pool as wide as SOPFORGE_MAX_CONCURRENCY,
set by ``sopforge eval``), so the Prefect UI shows each item and they run side by side; the
gateway's limiter decides how many model calls are really in flight. Results come back in item
order; an item never raises for a problem of its own (see ``sopforge.evaluation.runner``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait

from sopforge.evaluation.runner import Evaluation, leaderboard_markdown

__all__ = ["run_evaluation"]


@task(name="eval-item", cache_policy=NO_CACHE, persist_result=False)
def _item(call: Callable[[], str]) -> str:
    return call()


def run_evaluation(eval_id: str, home: str | None = None, retry_errors: bool = False) -> dict[str, Any]:
    """Run every item not yet done, store it, publish the leaderboard; returns the summary."""
    evaluation = Evaluation.open(eval_id, home)
    todo = evaluation.todo(retry_errors)
    futures = [_item.with_options(task_run_name=f"{family}: {item.key}").submit(partial(evaluation.run_item, family, item))
               for family, item in todo]
    wait(futures)
    statuses = [future.result() for future in futures]
    summary = evaluation.finish(statuses)
    summary["ran_now"] = len(todo)
    create_markdown_artifact(key=f"eval-{eval_id}", markdown=leaderboard_markdown(summary),
                             description=f"leaderboard of evaluation {eval_id}")
    return summary
