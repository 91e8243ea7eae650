"""Prefect flow: a theme's plan, the shared context stage and every chosen family's stages.

Composition only: the stage DAG comes from the families' declarations (``sopforge.families``);
each stage is a task (``sopforge.orchestration.tasks.stage_task``) that reuses or generates its
artifact and persists it, submitted as soon as the stages it reads are done, so independent stages
run side by side and the Prefect UI shows the real dependency graph. A failed check raises, so
nothing that reads the failed stage runs. After each gated stage (the theme's ``gates``) a review
gate holds its readers until the artifact is approved: automatically when every check passed
(``review: auto``), or by a reviewer on the paused flow run (``review: ui``).
Deployment entrypoint: ``flows/generate_domain.py:generate_domain``.
"""

from __future__ import annotations

from prefect import flow
from prefect.states import Completed, State

from sopforge.errors import NeedsReview
from sopforge.gc_thresholds import collect_less_often
from sopforge.orchestration.dag import run_plan
from sopforge.orchestration.executor import run_spec
from sopforge.orchestration.lifecycle import run_lifecycle
from sopforge.settings import load_settings
from sopforge.store import Store

# A deployment's flow run process starts by importing this module (see sopforge.gc_thresholds).
collect_less_often()


@flow(name="generate-domain", flow_run_name="{run_id}", persist_result=False, log_prints=True)
def generate_domain(run_id: str, home: str | None = None) -> dict[str, str] | State:
    """Generate (or reuse) every stage's artifact for a run created by ``sopforge generate``.

    Args:
        run_id: id of a row in the ``runs`` table; its config holds the theme, its families,
            model settings, review mode and gates.
        home: SOPFORGE_HOME of the store, when not the default.

    Returns:
        Artifact id per stage; or, when a review gate stopped the run, a Completed state named
        ``NeedsReview`` whose message says why (the run's status is ``needs_review``).
    """
    spec, _ = run_spec(Store(load_settings(home=home).db_path), run_id)
    try:
        with run_lifecycle(run_id, home):
            return run_plan(run_id, home, spec)
    except NeedsReview as stop:
        return Completed(name="NeedsReview", message=str(stop))
