"""Thin Prefect wrappers: run a stage as a task and publish its artifact to the Prefect UI."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from sopforge.orchestration.concurrency import prefect_map
from sopforge.orchestration.executor import StageOutcome, execute_stage
from sopforge.families import stage as stage_spec
from sopforge.render import artifact_markdown, checks_markdown
from sopforge.settings import load_settings


def publish(outcome: StageOutcome, run_id: str) -> None:
    """Publish the stage's artifact (and checks, failures first) as Prefect artifacts."""
    record = outcome.artifact
    key = f"{run_id}-{outcome.stage}".lower().replace("_", "-")
    origin = "reused from run " + record.run_id if outcome.reused else "generated"
    header = f"_{outcome.stage} v{record.version} ({origin}), artifact `{record.id}`_\n\n"
    create_markdown_artifact(
        markdown=header + artifact_markdown(outcome.stage, record.content) + "\n" + checks_markdown(outcome.checks),
        key=key, description=f"{outcome.stage} artifact of run {run_id}",
    )
    table = stage_spec(outcome.stage).table
    if table is not None:
        create_table_artifact(table=table.rows(record.content), key=f"{key}-table",
                              description=f"{table.description} of run {run_id}")


# Prefect's own result cache is off: the store decides what is reused (see executor.input_key),
# so deleting the database can never leave a stale cache behind.
@task(name="stage", task_run_name="{stage}", cache_policy=NO_CACHE, persist_result=False)
def stage_task(run_id: str, stage: str, home: str | None = None, upstream: list[str] | None = None,
               force: bool = False, feedback: str | None = None) -> str:
    """Run ``stage`` for ``run_id``; returns the artifact id it produced or reused.

    ``upstream`` (the parents' artifact ids) is not needed to compute anything (the executor
    reads lineage from the store) but passing it draws the dependency edges in the Prefect UI.
    ``force`` and ``feedback`` regenerate the stage after a reviewer rejected it.
    """
    outcome = execute_stage(run_id, stage, settings=load_settings(home=home), force=force, feedback=feedback,
                            mapper=prefect_map)
    publish(outcome, run_id)
    return outcome.artifact.id
