"""Review gates in the flow: decide automatically, or pause the flow run for a reviewer.

Under ``--review ui`` the gate publishes the artifact (rendered for the UI, failures first),
records an open review request, and pauses the flow run with ``pause_flow_run(wait_for_input=
ReviewDecision)``: the Prefect UI shows a Resume form, and ``sopforge review`` resumes it from a
terminal. The decision itself is applied by :mod:`sopforge.review.gate`, identically for both.
"""

from __future__ import annotations

from typing import Callable

from prefect.artifacts import create_markdown_artifact
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run

from sopforge.errors import NeedsReview, ReviewRejected
from sopforge.orchestration import executor
from sopforge.orchestration.lifecycle import current_flow_run_id
from sopforge.render import artifact_markdown, checks_markdown
from sopforge.review.decision import ReviewDecision
from sopforge.review.gate import GateOutcome, apply_decision, auto_decide
from sopforge.settings import Settings, load_settings
from sopforge.store import ArtifactRecord, ReviewWrite, Store

Regenerate = Callable[[str], str]  # feedback -> id of the regenerated artifact


def review_key(run_id: str, stage: str) -> str:
    """Prefect artifact key of a gate's review page (lowercase letters, digits and dashes)."""
    return f"{run_id}-{stage}-review".lower().replace("_", "-")


def review_markdown(run_id: str, artifact: ArtifactRecord, checks: list, note: str | None) -> str:
    failing = [c for c in checks if not c.passed]
    lead = f"> **Your previous decision was not applied:** {note}\n\n" if note else ""
    return (f"{lead}# Review: {artifact.stage} v{artifact.version} of run {run_id}\n\n"
            f"Artifact `{artifact.id}`; {len(checks) - len(failing)} of {len(checks)} checks passed"
            f"{', failing: ' + ', '.join(c.check_name for c in failing) if failing else ''}.\n\n"
            "Decide with **Resume** on this flow run: *approve*; *reject* with feedback (the stage is "
            "regenerated with it and comes back here); *edit* (paste the corrected artifact; it is "
            "re-validated); or *waive* (overrule failed checks that are wrong for this domain, naming them and "
            "giving the reason as feedback; they are recorded and exported). From a terminal: `sopforge review show " + run_id + "`.\n\n"
            + checks_markdown(checks) + "\n" + artifact_markdown(artifact.stage, artifact.content))


def wait_for_reviewer(store: Store, settings: Settings, run_id: str, artifact: ArtifactRecord,
                      note: str | None) -> GateOutcome:
    """Publish the artifact, pause the flow run until a decision arrives, apply it."""
    stage = artifact.stage
    checks = store.validations_for(artifact.id)
    page = review_markdown(run_id, artifact, checks, note)
    create_markdown_artifact(markdown=page, key=review_key(run_id, stage),
                             description=f"review of {stage} v{artifact.version} (run {run_id})")
    round_ = len(store.review_requests(run_id)) + 1
    pause_key = f"review-{stage}-{round_}"
    request = store.open_review_request(run_id, stage, artifact.id, flow_run_id=current_flow_run_id(),
                                        pause_key=pause_key)
    executor.notify(stage, f"waiting for review of {stage} v{artifact.version} (Prefect UI: Resume on the "
                           f"flow run; terminal: sopforge review approve|reject|edit {run_id})")
    form = ReviewDecision.with_initial_data(description=page, decision="approve")
    try:
        decision = pause_flow_run(wait_for_input=form, timeout=settings.review_timeout_seconds,
                                  poll_interval=settings.review_poll_seconds, key=pause_key)
    except FlowPauseTimeout:
        store.close_review_request(request.id, "expired")
        store.record_review(ReviewWrite(artifact_id=artifact.id, run_id=run_id, decision="timeout", source="auto",
                                        comment=f"no decision within {settings.review_timeout_seconds} s"))
        raise NeedsReview(f"nobody reviewed {stage} v{artifact.version} within {settings.review_timeout_seconds} s; "
                          f"nothing is lost: `sopforge rerun {run_id} --review ui` waits at this gate again") from None
    answered = next((r for r in store.review_requests(run_id) if r.id == request.id), request)
    store.set_run_status(run_id, "running")
    return apply_decision(store, settings, run_id, artifact, decision=decision.decision, feedback=decision.feedback,
                          edited_artifact=decision.edited_artifact, reviewer=decision.reviewer,
                          source=answered.answered_via or "ui", request_id=request.id, waive=decision.waive)


def review_gate(run_id: str, stage: str, artifact_id: str, home: str | None, regenerate: Regenerate) -> str:
    """Hold the chain after ``stage`` until its artifact is approved (or edited); return the id of
    the artifact downstream stages use.

    Raises:
        NeedsReview: a check failed under ``--review auto``, the release was rejected, or the
            reviewer did not answer in time.
    """
    settings = load_settings(home=home)
    store = Store(settings.db_path)
    spec, config = executor.run_spec(store, run_id)
    waivers = executor.run_waivers(store, spec, config, run_id)
    note: str | None = None
    while True:
        artifact = store.get_artifact(artifact_id)
        if spec.review == "auto":
            outcome = auto_decide(store, run_id, artifact, waivers)
        elif artifact.status == "approved":
            outcome = GateOutcome("continue", artifact.id, f"{stage} v{artifact.version} was approved earlier")
        else:
            outcome = wait_for_reviewer(store, settings, run_id, artifact, note)
        executor.notify(stage, outcome.message)
        if outcome.action == "continue":
            return outcome.artifact_id
        if outcome.action == "stop" and outcome.feedback:
            raise ReviewRejected(f"{outcome.message}; regenerate upstream with `sopforge rerun {run_id} --from STAGE`")
        if outcome.action == "stop":
            raise NeedsReview(f"{outcome.message}; see `sopforge review show {run_id}`")
        note = outcome.message if outcome.action == "ask_again" else None
        if outcome.action == "regenerate":
            artifact_id = regenerate(outcome.feedback or "")
