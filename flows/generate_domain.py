"""Prefect flow: theme → context → schema → SOP → API graph → dataset → tools → ground truth → package.

Composition only: each stage is a task (``sopforge.orchestration.tasks.stage_task``) that reuses
or generates its artifact and persists it; a failed check raises, so nothing downstream runs.
After each gated stage (the theme's ``gates``) a review gate holds the chain until the artifact
is approved: automatically when every check passed (``review: auto``), or by a reviewer on the
paused flow run (``review: ui``). Deployment entrypoint: ``flows/generate_domain.py:generate_domain``.
"""

from __future__ import annotations

from prefect import flow
from prefect.states import Completed, State

from sopforge.errors import NeedsReview
from sopforge.orchestration.executor import run_spec
from sopforge.orchestration.gates import review_gate
from sopforge.orchestration.lifecycle import run_lifecycle
from sopforge.orchestration.stage_defs import STAGE_DEFS
from sopforge.orchestration.tasks import stage_task
from sopforge.settings import load_settings
from sopforge.store import Store


@flow(name="generate-domain", flow_run_name="{run_id}", persist_result=False, log_prints=True)
def generate_domain(run_id: str, home: str | None = None) -> dict[str, str] | State:
    """Generate (or reuse) every stage's artifact for a run created by ``sopforge generate``.

    Args:
        run_id: id of a row in the ``runs`` table; its config holds the theme, model settings,
            review mode and gates.
        home: SOPFORGE_HOME of the store, when not the default.

    Returns:
        Artifact id per stage; or, when a review gate stopped the run, a Completed state named
        ``NeedsReview`` whose message says why (the run's status is ``needs_review``).
    """
    spec, _ = run_spec(Store(load_settings(home=home).db_path), run_id)
    artifacts: dict[str, str] = {}
    try:
        with run_lifecycle(run_id, home):
            for stage, definition in STAGE_DEFS.items():
                upstream = [artifacts[parent] for parent in definition.parents]
                artifacts[stage] = stage_task(run_id, stage, home, upstream=upstream)
                if stage in spec.gates:
                    artifacts[stage] = review_gate(run_id, stage, artifacts[stage], home, regenerate=(
                        lambda feedback, stage=stage, upstream=upstream: stage_task.with_options(
                            task_run_name=f"{stage} (revised)")(run_id, stage, home, upstream=upstream,
                                                                force=True, feedback=feedback)))
    except NeedsReview as stop:
        return Completed(name="NeedsReview", message=str(stop))
    return artifacts
