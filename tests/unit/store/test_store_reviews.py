"""Review decisions and review requests in the real DuckDB store."""

from __future__ import annotations

import pytest

from sopforge.store import ArtifactWrite, ReviewWrite


def test_approve_records_version_and_makes_the_artifact_final(store, run_id, save, sql):
    art = save(run_id, "sop")
    review = store.record_review(ReviewWrite(artifact_id=art.id, run_id=run_id, decision="approve",
                                             reviewer="dana", source="ui", comment="reads well"))
    assert (review.stage, review.artifact_version, review.decision, review.reviewer, review.source) == (
        "sop", 1, "approve", "dana", "ui")
    assert store.get_artifact(art.id).status == "approved"
    # A later version of the same stage in the same run does not supersede the approval.
    save(run_id, "sop", content={"title": "v2"})
    assert store.get_artifact(art.id).status == "approved"
    # Neither does a later reject of the same version.
    store.record_review(ReviewWrite(artifact_id=art.id, run_id=run_id, decision="reject", comment="too late"))
    assert store.get_artifact(art.id).status == "approved"
    assert [r.decision for r in store.reviews_for(art.id)] == ["approve", "reject"]
    assert sql("SELECT count(*) FROM reviews WHERE run_id = ?", [run_id]) == [(2,)]


def test_reject_marks_rejected_so_no_later_run_reuses_it(store, run_id, save):
    art = save(run_id, "sop", input_key="k-sop")
    store.record_review(ReviewWrite(artifact_id=art.id, run_id=run_id, decision="reject", comment="cite the threshold"))
    assert store.get_artifact(art.id).status == "rejected"
    assert store.find_reusable_artifact("sop", "k-sop") is None


def test_request_lifecycle_and_run_status(store, run_id, save):
    art = save(run_id, "sop")
    request = store.open_review_request(run_id, "sop", art.id, flow_run_id="fr-1", pause_key="review-sop-1")
    assert store.get_run(run_id).status == "awaiting_review"
    assert [r.id for r in store.review_requests(run_id, open_only=True)] == [request.id]
    # Opening another request for the same run expires the stale one (its process died).
    second = store.open_review_request(run_id, "sop", art.id, flow_run_id="fr-1", pause_key="review-sop-2")
    statuses = {r.id: r.status for r in store.review_requests(run_id)}
    assert statuses == {request.id: "expired", second.id: "open"}
    store.record_review(ReviewWrite(artifact_id=art.id, run_id=run_id, decision="approve", close_request_id=second.id))
    assert store.review_requests(run_id, open_only=True) == []
    assert store.review_requests(run_id)[0].closed_at is not None


def test_save_edit_is_one_transaction(store, run_id, save):
    art = save(run_id, "sop", content={"title": "generated"})
    edited = ArtifactWrite(run_id=run_id, stage="sop", kind="SopDoc", content={"title": "edited"},
                           input_key="key-sop", status="approved", parents=[])
    new, review = store.save_edit(edited, ReviewWrite(artifact_id=art.id, run_id=run_id, decision="edit",
                                                      reviewer="dana"), diff="-generated\n+edited")
    assert (new.version, new.status) == (2, "approved")
    assert store.get_artifact(art.id).status == "superseded"
    assert (review.result_artifact_id, review.edit_diff) == (new.id, "-generated\n+edited")

    # A failing part rolls back the whole edit: no version 3, no extra review.
    broken = edited.model_copy(update={"parents": ["a-missing"]})
    with pytest.raises(ValueError, match="unknown parent"):
        store.save_edit(broken, ReviewWrite(artifact_id=new.id, run_id=run_id, decision="edit"), diff="x")
    assert [a.version for a in store.artifacts_for_run(run_id, "sop")] == [1, 2]
    assert len(store.reviews_for_run(run_id)) == 1


def test_unknown_decision_is_refused():
    with pytest.raises(ValueError):
        ReviewWrite(artifact_id="a", run_id="r", decision="maybe")
