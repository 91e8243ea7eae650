"""Independent calls inside a stage as Prefect task runs (the mapper behind ``sopforge.ask.fan_out``).

A stage declares what is independent with ``fan_out(fn, items)`` and knows nothing of Prefect. While
a stage runs inside the flow, the executor installs :func:`prefect_map`: every item becomes a child
task run of the stage's task run, submitted to the flow's task runner (``Task.submit``), so the
Prefect UI shows the calls of one stage overlapping and the items run concurrently. Prefect's own
futures collect the results, in item order (never completion order), so the artifact a stage
builds is the same whatever finishes first. The provider's concurrency cap and adaptive rate limit
(``sopforge.llm.limits``), shared by every stage of the process, decide how many calls are really
in flight at once.

Outside a flow run (unit tests, scripts) there is no task runner, and the sequential map is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TagsContext, TaskRunContext
from prefect.futures import wait

from sopforge.ask import sequential_map

__all__ = ["prefect_map", "untagged"]


@contextmanager
def untagged() -> Iterator[None]:
    """Task runs submitted here carry no tags (the flow run keeps the ones the runs list shows).

    Prefect asks the server for a tag concurrency slot before every tagged task run starts. While the
    server writes a finished task's events, its SQLite answers that request 503, and the client asks
    again 2 s later: measured on 3 to 4 stage starts of every run (sopforge sets no tag limits).
    """
    with TagsContext(current_tags=set()):
        yield


# No retries and no result cache: the gateway retries transport errors, the store decides reuse.
@task(name="llm-calls", cache_policy=NO_CACHE, persist_result=False)
def _item(call: Callable[[], Any]) -> Any:
    return call()


def prefect_map(fn: Callable[[Any], Any], items: Sequence[Any], label: str = "item") -> list[Any]:
    """``[fn(item) for item in items]`` as concurrent Prefect task runs, results in item order.

    Raises:
        The first failure in item order, once every item has finished (their calls are recorded,
        so a resumed run answers them from the response cache instead of paying again).
    """
    if len(items) <= 1 or FlowRunContext.get() is None:
        return sequential_map(fn, items, label)
    parent = TaskRunContext.get()
    # Named after the stage (the part before ":" of a nested item's name): "manipulations: variant 3/7".
    prefix = f"{parent.task_run.name.split(':')[0]}: " if parent is not None else ""
    # The item is bound in a partial (not passed as a parameter) so Prefect does not walk large
    # pydantic inputs looking for futures.
    with untagged():
        futures = [_item.with_options(task_run_name=f"{prefix}{label} {i + 1}/{len(items)}").submit(partial(fn, item))
                   for i, item in enumerate(items)]
    wait(futures)
    return [future.result() for future in futures]
