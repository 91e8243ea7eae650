"""Answer a review gate from a terminal (``sopforge review approve|reject|edit``).

A run waits for review in one of two ways:

* ``awaiting_review``: its flow run is paused at a gate (``--review ui``). The decision is
  checked here first (an edit that fails its checks is refused and the run stays paused), then
  sent to Prefect with ``resume_flow_run(run_input=…)``, exactly what the UI's Resume form
  sends; the paused flow applies it and we wait until the store shows it did.
* ``needs_review``: an automatic gate (or a timed-out pause) stopped the run. The decision
  is applied to the store directly and ``sopforge rerun RUN`` continues from the gate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sopforge.errors import UserError
from sopforge.review.edits import check_edit
from sopforge.review.gate import apply_decision
from sopforge.settings import Settings
from sopforge.store import ArtifactRecord, ReviewRecord, RunRecord, Store

WAITING = ("awaiting_review", "needs_review")


@dataclass
class Pending:
    """The gate a run waits at: the artifact under review and, when paused, the request."""

    run: RunRecord
    stage: str
    artifact: ArtifactRecord
    request_id: str | None = None
    flow_run_id: str | None = None


def pending_review(store: Store, run_ref: str, stage: str | None = None) -> Pending:
    """The gate ``run_ref`` waits at.

    Raises:
        UserError: The run is not waiting for review, or waits at another stage than ``stage``.
    """
    run = store.get_run(run_ref)
    if run.status not in WAITING:
        raise UserError(f"run {run.id} is not waiting for review (status {run.status}); "
                        f"`sopforge review list` shows the runs that are")
    if run.status == "awaiting_review":
        requests = store.review_requests(run.id, open_only=True)
        if not requests:
            raise UserError(f"run {run.id} is marked awaiting_review but has no open gate; "
                            f"its process probably died: `sopforge rerun {run.id} --force --review ui`")
        request = requests[0]
        pending = Pending(run, request.stage, store.get_artifact(request.artifact_id), request.id, request.flow_run_id)
    else:
        stops = [r for r in store.reviews_for_run(run.id) if r.decision in ("needs_review", "timeout")]
        if not stops:
            raise UserError(f"run {run.id} stopped before any gate ({run.error}); fix the cause and `sopforge rerun {run.id}`")
        pending = Pending(run, stops[-1].stage, store.get_artifact(stops[-1].artifact_id))
    if stage is not None and stage != pending.stage:
        raise UserError(f"run {run.id} waits for review of {pending.stage}, not {stage}: "
                        f"drop --stage or pass --stage {pending.stage}")
    return pending


def precheck(store: Store, settings: Settings, pending: Pending, decision: str, feedback: str, edited: str) -> None:
    """Refuse a decision that could not be applied, before anything is sent or stored."""
    if decision == "reject" and not feedback.strip():
        raise UserError("reject needs --feedback \"…\": say what the regenerated version must change")
    if decision == "waive" and not feedback.strip():
        raise UserError("waive needs --reason \"…\": say why the check is wrong for this domain")
    if decision == "edit":
        parents = {p.stage: p.content for p in store.parents_of(pending.artifact.id)}
        check_edit(pending.stage, edited, pending.artifact.content, parents, settings)


def submit(store: Store, settings: Settings, pending: Pending, *, decision: str, feedback: str = "",
           edited: str = "", reviewer: str = "", wait_seconds: float | None = None, waive: str = "") -> ReviewRecord:
    """Apply (stopped run) or send (paused run) a decision; return the review that was recorded.

    Raises:
        UserError: The decision is refused (the run stays as it was), Prefect cannot resume the
            flow run, or the flow run did not record the decision in time.
    """
    precheck(store, settings, pending, decision, feedback, edited)
    if pending.request_id is None:
        outcome = apply_decision(store, settings, pending.run.id, pending.artifact, decision=decision,
                                 feedback=feedback, edited_artifact=edited, reviewer=reviewer, source="cli",
                                 waive=waive)
        if outcome.action == "ask_again":
            raise UserError(outcome.message)
        return store.reviews_for_run(pending.run.id)[-1]
    return _resume(store, settings, pending, decision=decision, feedback=feedback, edited=edited,
                   reviewer=reviewer, wait_seconds=wait_seconds, waive=waive)


def _resume(store: Store, settings: Settings, pending: Pending, *, decision: str, feedback: str, edited: str,
            reviewer: str, wait_seconds: float | None, waive: str = "") -> ReviewRecord:
    from prefect.exceptions import FlowPauseTimeout
    from prefect.flow_runs import resume_flow_run

    from sopforge.review.decision import ReviewDecision

    if not pending.flow_run_id:
        raise UserError(f"run {pending.run.id} has no Prefect flow run id recorded; rerun it with `sopforge rerun`")
    before = {r.id for r in store.reviews_for_run(pending.run.id)}
    store.mark_answered_via(pending.request_id, "cli")
    run_input = ReviewDecision(decision=decision, feedback=feedback, edited_artifact=edited,
                               reviewer=reviewer, waive=waive).model_dump(mode="json", include=set(ReviewDecision.model_fields))
    try:
        resume_when_server_answers(lambda: resume_flow_run(UUID(pending.flow_run_id), run_input=run_input))
    except FlowPauseTimeout:
        raise UserError(f"the pause of run {pending.run.id} has timed out; `sopforge rerun {pending.run.id} --review ui` "
                        f"waits at this gate again") from None
    except Exception as err:  # NotPausedError, HTTP errors: one line naming the cause
        busy = " (the Prefect server stayed busy: run the command again)" if _server_busy(err) else ""
        raise UserError(f"could not resume flow run {pending.flow_run_id} of run {pending.run.id}{busy}: "
                        f"{err.__class__.__name__}: {str(err).splitlines()[0]}") from None
    deadline = time.monotonic() + (wait_seconds if wait_seconds is not None else 3 * settings.review_poll_seconds + 60)
    while time.monotonic() < deadline:
        new = [r for r in store.reviews_for_run(pending.run.id) if r.id not in before and r.source == "cli"]
        if new:
            return new[-1]
        time.sleep(0.5)
    raise UserError(f"flow run {pending.flow_run_id} was resumed but has not recorded the decision yet; "
                    f"check it with `sopforge review show {pending.run.id}` or in the Prefect UI")


# A resume is one deferred SQLite transaction on a local Prefect server: it reads the paused state, then
# writes the new one, and fails with "database is locked" (HTTP 503, at once, not after a wait) whenever
# another write landed in between. Prefect's client retries a 503 five times over about a minute; under
# the writes of several busy flows that was not enough once (CI, 2026-11-27). A failed resume changed
# nothing, so it is asked again.
RESUME_ROUNDS = 3


def resume_when_server_answers(resume: Callable[[], Any], rounds: int = RESUME_ROUNDS,
                               pause: Callable[[float], None] = time.sleep) -> None:
    """Call ``resume`` until the server does not answer 503, at most ``rounds`` times (each one already
    retried by Prefect's client). A flow run no longer paused after a 503 was resumed meanwhile: the wait
    that follows checks that the store recorded this decision."""
    from prefect.exceptions import NotPausedError

    for round_ in range(1, rounds + 1):
        try:
            resume()
            return
        except NotPausedError:
            if round_ == 1:
                raise
            return  # the earlier round's resume went through although its answer did not
        except Exception as err:
            if not _server_busy(err) or round_ == rounds:
                raise
            pause(5.0 * round_)


def _server_busy(err: BaseException) -> bool:
    response = getattr(err, "response", None)
    return getattr(response, "status_code", None) == 503
