"""Prefect flow: theme → context → schema → SOP → API graph → dataset → tools → ground truth → package.

Composition only: each stage is a task (``sopforge.orchestration.tasks.stage_task``) that reuses
or generates its artifact and persists it; a failed check raises, so nothing downstream runs.
Deployment entrypoint: ``flows/generate_domain.py:generate_domain``.
"""

from __future__ import annotations

from prefect import flow

from sopforge.orchestration.lifecycle import run_lifecycle
from sopforge.orchestration.tasks import stage_task


@flow(name="generate-domain", flow_run_name="{run_id}", persist_result=False, log_prints=True)
def generate_domain(run_id: str, home: str | None = None) -> dict[str, str]:
    """Generate (or reuse) every stage's artifact for a run created by ``sopforge generate``.

    Args:
        run_id: id of a row in the ``runs`` table; its config holds the theme and model settings.
        home: SOPFORGE_HOME of the store, when not the default.

    Returns:
        Artifact id per stage.
    """
    with run_lifecycle(run_id, home):
        context = stage_task(run_id, "context", home)
        schema = stage_task(run_id, "schema", home, upstream=[context])
        sop = stage_task(run_id, "sop", home, upstream=[context, schema])
        api_graph = stage_task(run_id, "api_graph", home, upstream=[context, schema, sop])
        dataset = stage_task(run_id, "dataset", home, upstream=[context, schema, sop])
        tools = stage_task(run_id, "tools", home, upstream=[context, schema, sop, api_graph, dataset])
        reference = stage_task(run_id, "reference", home, upstream=[schema, sop, api_graph, tools, dataset])
        package = stage_task(run_id, "package", home, upstream=[context, sop, api_graph, tools, reference])
    return {"context": context, "schema": schema, "sop": sop, "api_graph": api_graph, "dataset": dataset,
            "tools": tools, "reference": reference, "package": package}
