"""Apply a gate's decision to the store (Prefect-free: the flow and the CLI both call this).

The outcome tells the flow what to do next: continue with an artifact, regenerate the stage
with feedback, pause again (an edit that failed its checks), or stop the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sopforge.errors import UserError
from sopforge.review.edits import check_edit
from sopforge.settings import Settings
from sopforge.store import ArtifactRecord, ArtifactWrite, ReviewWrite, Store
from sopforge.store.records import ReviewSource

Action = Literal["continue", "regenerate", "ask_again", "stop"]
#: Stages built without a model: a rejection cannot be answered by regenerating them.
NOT_REGENERABLE = frozenset({"package"})


@dataclass
class GateOutcome:
    """What the flow does after a decision."""

    action: Action
    artifact_id: str
    message: str
    feedback: str | None = None


def failing_checks(store: Store, artifact_id: str) -> list:
    """Failed checks of an artifact that nobody overruled (a waived check is failed but settled)."""
    return [c for c in store.validations_for(artifact_id) if not c.passed and not (c.details or {}).get("waived")]


def auto_decide(store: Store, run_id: str, artifact: ArtifactRecord,
                waivers: dict[str, str] | None = None) -> GateOutcome:
    """``--review auto``: approve when every check passed or is waived, else stop the run as needs_review.

    Args:
        waivers: The run's waivers (``executor.run_waivers``). An artifact reused from an earlier run keeps the
            validations stored when it was made, so a check waived since (``rerun --waive``) is settled here.
    """
    if artifact.status == "approved":
        return GateOutcome("continue", artifact.id, f"{artifact.stage} v{artifact.version} was approved earlier")
    found = failing_checks(store, artifact.id)
    failing = [c for c in found if c.check_name not in (waivers or {})]
    if not failing:
        total = len(store.validations_for(artifact.id))
        waived = f"; waived: {', '.join(c.check_name for c in found)}" if found else ""
        store.record_review(ReviewWrite(artifact_id=artifact.id, run_id=run_id, decision="approve", reviewer="auto",
                                        source="auto", comment=f"all {total} checks passed{waived}"))
        return GateOutcome("continue", artifact.id,
                           f"{artifact.stage} approved automatically ({total - len(found)} checks passed{waived})")
    names = ", ".join(f"{c.check_name} ({c.severity})" for c in failing[:5])
    reason = f"{artifact.stage} v{artifact.version} has {len(failing)} failing check(s): {names}"
    store.record_review(ReviewWrite(artifact_id=artifact.id, run_id=run_id, decision="needs_review", reviewer="auto",
                                    source="auto", comment=reason))
    return GateOutcome("stop", artifact.id, reason)


def apply_decision(store: Store, settings: Settings, run_id: str, artifact: ArtifactRecord, *, decision: str,
                   feedback: str = "", edited_artifact: str = "", reviewer: str = "", source: ReviewSource = "ui",
                   request_id: str | None = None, waive: str = "") -> GateOutcome:
    """Record a reviewer's decision on ``artifact`` and say what happens next.

    An edit is re-validated first; if it fails, the refusal is recorded as ``refused``
    with the reason and the gate asks again (the artifact under review is untouched).
    """
    who = reviewer.strip() or None
    base = ReviewWrite(artifact_id=artifact.id, run_id=run_id, decision="approve", reviewer=who, source=source,
                       close_request_id=request_id)
    stage = artifact.stage
    if decision == "approve":
        store.record_review(base)
        return GateOutcome("continue", artifact.id, f"{stage} v{artifact.version} approved")
    if decision == "reject":
        text = feedback.strip()
        if not text:
            return _refuse(store, base, f"reject needs feedback: say what to change in {stage}")
        store.record_review(base.model_copy(update={"decision": "reject", "comment": text}))
        if stage in NOT_REGENERABLE:
            return GateOutcome("stop", artifact.id, f"{stage} rejected by {who or 'the reviewer'}: {text}", feedback=text)
        return GateOutcome("regenerate", artifact.id, f"{stage} v{artifact.version} rejected; regenerating", feedback=text)
    if decision == "edit":
        parents = store.parents_of(artifact.id)
        try:
            edit = check_edit(stage, edited_artifact, artifact.content, {p.stage: p.content for p in parents}, settings)
        except UserError as err:
            return _refuse(store, base, str(err))
        stage_run_id = store.start_stage(run_id, stage)
        new, _ = store.save_edit(ArtifactWrite(
            run_id=run_id, stage=stage, kind=artifact.kind, content=edit.content, input_key=artifact.input_key,
            template_id=artifact.template_id, template_hash=artifact.template_hash, model=artifact.model,
            status="approved", parents=[p.id for p in parents], checks=edit.checks,
            stage_run_id=stage_run_id,
        ), base.model_copy(update={"decision": "edit", "comment": feedback.strip() or None}), diff=edit.diff)
        return GateOutcome("continue", new.id, f"{stage} edited by {who or 'the reviewer'}: v{new.version} stored and approved")
    if decision == "waive":
        return _waive(store, base, artifact, waive, feedback.strip())
    return _refuse(store, base, f"unknown decision {decision!r}: choose approve, reject, edit or waive")


def _waive(store: Store, base: ReviewWrite, artifact: ArtifactRecord, names: str, reason: str) -> GateOutcome:
    """Approve the artifact overruling named failed checks: one ``waive`` review row per check ("check: reason"),
    which the rest of the run applies too (executor.run_waivers) and the export's metadata lists."""
    failed = [c.check_name for c in failing_checks(store, artifact.id)]
    chosen = [n.strip() for n in names.split(",") if n.strip()] or failed
    if not reason:
        return _refuse(store, base, "waive needs the reason in feedback: say why the check is wrong for this domain")
    unknown = [n for n in chosen if n not in failed]
    if unknown or not chosen:
        return _refuse(store, base, f"nothing to waive: {', '.join(unknown) or 'no check'} is not a failed check of "
                                    f"{artifact.stage} (failed: {', '.join(failed) or 'none'})")
    for name in chosen:
        store.record_review(base.model_copy(update={"decision": "waive", "comment": f"{name}: {reason}",
                                                    "close_request_id": base.close_request_id if name == chosen[-1]
                                                    else None}))
    return GateOutcome("continue", artifact.id, f"{artifact.stage} v{artifact.version} approved, overruling "
                                                f"{', '.join(chosen)}: {reason}")


def _refuse(store: Store, base: ReviewWrite, reason: str) -> GateOutcome:
    store.record_review(base.model_copy(update={"decision": "refused", "comment": reason}))
    return GateOutcome("ask_again", base.artifact_id, reason)
