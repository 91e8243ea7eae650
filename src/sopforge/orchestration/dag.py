"""Run a plan's stages as Prefect tasks in dependency order, independent ones side by side.

Each stage is submitted (``stage_task.submit``) as soon as every stage it reads has an approved
artifact, with ``wait_for`` on the task runs that produced them, so Prefect's graph is the plan's
real data dependency graph and, for the sop_tools family, ``api_graph`` overlaps ``dataset`` and
``distractors`` overlaps ``manipulations``. Results do not depend on completion order: a stage
reads its parents' artifacts from the store, never from another task's return value.

A review gate runs in the flow (it may pause the flow run) as soon as its stage finishes, while
other branches keep running. After the first failure nothing new is submitted; stages already
running are allowed to finish (their artifacts are stored and a resumed run reuses them), then the
failure is raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.futures import as_completed

from sopforge.orchestration.concurrency import untagged
from sopforge.orchestration.gates import review_gate
from sopforge.orchestration.tasks import stage_task

if TYPE_CHECKING:
    from prefect.futures import PrefectFuture

    from sopforge.families import Plan, StageSpec
    from sopforge.theme import ThemeSpec

__all__ = ["run_plan"]


def run_plan(run_id: str, home: str | None, spec: "ThemeSpec") -> dict[str, str]:
    """Produce (or reuse) every stage's artifact of ``spec``'s plan; return artifact id per stage.

    Raises:
        The first stage failure or review-gate stop (NeedsReview, ReviewRejected), after the
        stages already running have finished.
    """
    plan: Plan = spec.plan()
    approved: dict[str, str] = {}                 # stage -> artifact id its readers use
    producer: dict[str, PrefectFuture] = {}       # stage -> task run that produced that artifact
    running: dict[PrefectFuture, StageSpec] = {}
    pending = list(plan.stages)
    failure: BaseException | None = None

    def submit(stage: StageSpec, **options) -> PrefectFuture:
        upstream = [approved[p] for p in stage.parents]
        task = stage_task.with_options(task_run_name=options.pop("name", stage.name))
        with untagged():
            return task.submit(run_id, stage.name, home, upstream=upstream,
                               wait_for=[producer[p] for p in stage.parents], **options)

    while running or (pending and failure is None):
        if failure is None:
            for stage in [s for s in pending if set(s.parents) <= approved.keys()]:
                pending.remove(stage)
                running[submit(stage)] = stage
        if not running:
            raise RuntimeError(f"stages {[s.name for s in pending]} wait for stages that never ran")
        future = next(as_completed(list(running)))
        stage = running.pop(future)
        try:
            artifact_id = future.result()
            producer[stage.name] = future
            if stage.name in spec.gates:
                artifact_id = review_gate(run_id, stage.name, artifact_id, home,
                                          regenerate=lambda feedback, s=stage: _regenerate(submit, producer, s, feedback))
            approved[stage.name] = artifact_id
        except BaseException as err:  # noqa: BLE001 - re-raised once the running stages are done
            failure = failure or err
    if failure is not None:
        raise failure
    return approved


def _regenerate(submit, producer: dict, stage: "StageSpec", feedback: str) -> str:
    """A reviewer rejected the artifact: regenerate it with the feedback (its own task run)."""
    future = submit(stage, name=f"{stage.name} (revised)", force=True, feedback=feedback)
    artifact_id = future.result()
    producer[stage.name] = future
    return artifact_id
