"""SQL for review decisions and open review requests (``reviews``, ``review_requests``)."""

from __future__ import annotations

from typing import Any

import duckdb

from . import queries as q
from .records import ReviewRecord, ReviewRequestRecord, ReviewWrite

Con = duckdb.DuckDBPyConnection

# What each decision does to the judged artifact's status (None: leaves it alone).
DECISION_STATUS: dict[str, str | None] = {
    "approve": "approved", "reject": "rejected", "edit": "superseded", "waive": "approved",
    "needs_review": None, "refused": None, "timeout": None,
}


def insert_review(con: Con, review: ReviewWrite, *, result_artifact_id: str | None = None) -> str:
    """Insert the decision, update the judged artifact's status and close the request it answers."""
    artifact = q.get_artifact(con, review.artifact_id)
    if artifact is None:
        raise ValueError(f"unknown artifact {review.artifact_id!r}")
    review_id = q.new_id("rv", 12)
    con.execute(
        "INSERT INTO reviews (id, artifact_id, run_id, stage, artifact_version, decision, reviewer, source, "
        "comment, edit_diff, result_artifact_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [review_id, artifact.id, review.run_id, artifact.stage, artifact.version, review.decision,
         review.reviewer, review.source, review.comment, review.edit_diff, result_artifact_id, q.now()])
    new_status = DECISION_STATUS[review.decision]
    # An approval is final; only a version that is not yet approved changes status. The automatic
    # gate records its verdict but leaves the status alone: 'approved' means a person approved it,
    # so a later --review ui run still shows a reviewer what only the checks have seen.
    if new_status is not None and artifact.status != "approved" and review.source != "auto":
        con.execute("UPDATE artifacts SET status = ? WHERE id = ?", [new_status, artifact.id])
    if review.close_request_id:
        close_request(con, review.close_request_id, "answered")
    return review_id


def close_request(con: Con, request_id: str, status: str) -> None:
    con.execute("UPDATE review_requests SET status = ?, closed_at = ? WHERE id = ? AND status = 'open'",
                [status, q.now(), request_id])


def insert_request(con: Con, run_id: str, stage: str, artifact_id: str, flow_run_id: str | None,
                   pause_key: str | None) -> str:
    # A run waits at one gate at a time: anything still open is stale (its process died).
    con.execute("UPDATE review_requests SET status = 'expired', closed_at = ? WHERE run_id = ? AND status = 'open'",
                [q.now(), run_id])
    request_id = q.new_id("rq", 12)
    con.execute(
        "INSERT INTO review_requests (id, run_id, stage, artifact_id, flow_run_id, pause_key, status, opened_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 'open', ?)", [request_id, run_id, stage, artifact_id, flow_run_id, pause_key, q.now()])
    return request_id


def get_review(con: Con, review_id: str) -> ReviewRecord:
    return ReviewRecord(**q.fetch_one(con, "SELECT * FROM reviews WHERE id = ?", [review_id]))


def reviews_where(con: Con, where: str, params: list[Any]) -> list[ReviewRecord]:
    return [ReviewRecord(**r) for r in q.fetch_dicts(con, f"SELECT * FROM reviews WHERE {where}", params)]


def requests_where(con: Con, where: str, params: list[Any]) -> list[ReviewRequestRecord]:
    return [ReviewRequestRecord(**r) for r in q.fetch_dicts(con, f"SELECT * FROM review_requests WHERE {where}", params)]
