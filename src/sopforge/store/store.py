"""``Store``: the one class that touches DuckDB.

Runs, stage attempts, versioned artifacts with lineage and checks, reviews and LLM calls.
Writes that belong together (an artifact, its lineage edges, its validations and the stage
run it finishes) share one transaction, so a crash never leaves half a stage.
"""

from __future__ import annotations

import typing
from typing import Any

from sopforge.errors import UserError
from sopforge.checks import blocking_failures
from sopforge.funnel import FunnelRow

from . import queries as q
from . import review_queries as rq
from .base import DEFAULT_LOCK_TIMEOUT, require, transaction
from .deletion import RunHousekeeping
from .evals import EvalResults
from .ledger import LedgerStore
from .records import (
    LIVE_STATUSES,
    REUSABLE_STATUSES,
    ArtifactRecord,
    ArtifactStatus,
    ArtifactWrite,
    ReviewRecord,
    ReviewRequestRecord,
    ReviewRequestStatus,
    ReviewSource,
    ReviewWrite,
    RunRecord,
    RunStatus,
    RunSummary,
    StageRunRecord,
    ValidationRecord,
)
from .owner import Owner
from .redact import redact_text, scrub
from .summary import build_summary

__all__ = ["DEFAULT_LOCK_TIMEOUT", "Store"]


class Store(LedgerStore, RunHousekeeping, EvalResults):
    """Persistent state of sopforge in one DuckDB file; implements ``CallLedger`` (``ledger.py``).

    Args:
        path: The DuckDB file (usually ``settings.db_path``); created with its folder on
            first write, and migrated automatically.
        lock_timeout: Seconds to wait for another sopforge process that holds the file
            before raising ``UserError``.
    """

    # --- runs -------------------------------------------------------------------------

    def create_run(self, theme: str, theme_slug: str, config: dict[str, Any]) -> str:
        """Record a new run with status ``running``, owned by this process.

        Args:
            theme: The business theme as given.
            theme_slug: Its slug (used in call keys and export folders).
            config: Provider, model and parameters. Secrets are redacted before storing.

        Returns:
            The new run id, e.g. ``r-3fa94c0b12``.
        """
        safe_config = scrub(config)
        with self._write() as con, transaction(con):
            run_id = q.new_id("r", 10)
            while q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [run_id]):
                run_id = q.new_id("r", 10)
            q.insert_run(con, run_id, theme, theme_slug, safe_config, Owner.current())
        return run_id

    def claim_run(self, run_id: str, flow_run_id: str | None = None) -> None:
        """Mark the run ``running`` and owned by this process (the one about to execute it).

        Raises:
            ValueError: Unknown run id.
        """
        owner = Owner.current()
        with self._write() as con, transaction(con):
            if not q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [run_id]):
                raise ValueError(f"unknown run {run_id!r}")
            ts = q.now()
            con.execute("UPDATE runs SET status = 'running', error = NULL, flow_run_id = coalesce(?, flow_run_id), "
                        "owner_host = ?, owner_pid = ?, owner_started = ?, heartbeat_at = ?, updated_at = ? "
                        "WHERE id = ?", [flow_run_id, owner.host, owner.pid, owner.started, ts, ts, run_id])

    def heartbeat(self, run_id: str) -> None:
        """Refresh the run's sign of life, if this process still owns it."""
        owner = Owner.current()
        with self._write() as con, transaction(con):
            con.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ? AND owner_host = ? AND owner_pid = ?",
                        [q.now(), run_id, owner.host, owner.pid])

    def mark_interrupted(self) -> list[str]:
        """Record as ``interrupted`` every running or paused run whose process is gone.

        Readers already show such runs as interrupted; this writes it down, so plain SQL agrees:
        the run's status and error, its stage attempts still ``running``, and its open review
        requests (expired: nobody waits at that gate any more).

        Every command calls it when it opens the store (it writes only when it finds such a run), so
        plain SQL says ``interrupted`` from the first command after the kill on.

        Returns:
            The ids of the runs marked.
        """
        live = "SELECT * FROM runs WHERE list_contains(?, status)"
        with self._read() as con:  # the usual case, nothing to mark, takes no write lock
            if not any(q.owner_gone(RunRecord(**row)) for row in q.fetch_dicts(con, live, [list(LIVE_STATUSES)])):
                return []
        with self._write() as con, transaction(con):
            stale = [r for r in (RunRecord(**row) for row in q.fetch_dicts(con, live, [list(LIVE_STATUSES)]))
                     if q.owner_gone(r)]
            for run in stale:
                q.interrupt_run(con, run.id, q.interrupted_error(run), "interrupted: its process is gone")
        return [r.id for r in stale]

    def record_interruption(self, run_id: str, reason: str) -> None:
        """This process was stopped (SIGINT, SIGTERM) while running ``run_id``: the run, its running
        stage attempts and its open review requests become ``interrupted`` / expired, with ``reason``."""
        with self._write() as con, transaction(con):
            q.interrupt_run(con, run_id, reason, reason, only_live=True)

    def set_run_status(self, run_id: str, status: RunStatus, error: str | None = None,
                       flow_run_id: str | None = None) -> None:
        """Change a run's status; ``error`` replaces the stored error, ``flow_run_id`` is kept
        when not given.

        Raises:
            ValueError: Unknown status or run id.
        """
        require(status, RunStatus, "run status")
        with self._write() as con, transaction(con):
            if not q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [run_id]):
                raise ValueError(f"unknown run {run_id!r}")
            con.execute("UPDATE runs SET status = ?, error = ?, flow_run_id = coalesce(?, flow_run_id), "
                        "updated_at = ? WHERE id = ?", [status, redact_text(error), flow_run_id, q.now(), run_id])

    def get_run(self, run_id_or_prefix: str) -> RunRecord:
        """The run with this id, or the only run whose id starts with it (``r-`` optional).

        Raises:
            UserError: No run matches, or several do.
        """
        with self._read() as con:
            matches = q.runs_matching(con, run_id_or_prefix.strip())
        if not matches:
            raise UserError(f"no run matches {run_id_or_prefix!r} in {self.path}; "
                            f"list runs to see their ids")
        if len(matches) > 1:
            shown = ", ".join(m.id for m in matches[:5])
            raise UserError(f"run id prefix {run_id_or_prefix!r} is ambiguous (matches {shown}"
                            f"{', ...' if len(matches) > 5 else ''}); type more characters")
        return matches[0]

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The most recent runs, newest first."""
        with self._read() as con:
            rows = q.fetch_dicts(con, "SELECT * FROM runs ORDER BY created_at DESC, id LIMIT ?", [limit])
        return [q.run_record(r) for r in rows]

    def run_summary(self, run_id_or_prefix: str) -> RunSummary:
        """A run with each stage's latest attempt, its artifact, check counts and LLM spend.

        Raises:
            UserError: The run id or prefix matches no run, or several.
        """
        run = self.get_run(run_id_or_prefix)
        with self._read() as con:
            return build_summary(con, run)

    # --- stage runs -------------------------------------------------------------------

    def start_stage(self, run_id: str, stage: str, family: str | None = None) -> str:
        """Record the next attempt of ``stage`` in ``run_id`` as running; return its id.

        Raises:
            ValueError: Unknown run id.
        """
        with self._write() as con, transaction(con):
            if not q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [run_id]):
                raise ValueError(f"unknown run {run_id!r}")
            return q.insert_stage_run(con, run_id, stage, family=family)

    def finish_stage(self, stage_run_id: str, status: typing.Literal["succeeded", "failed"], *,
                     artifact_id: str | None = None, error: str | None = None) -> None:
        """Close a stage attempt and record the LLM calls, tokens and cost it spent.

        Calls count when they belong to the same run and stage and were created between the
        attempt's start and now.

        Raises:
            ValueError: Unknown stage run id or a status other than succeeded/failed.
        """
        require(status, typing.Literal["succeeded", "failed"], "stage status")
        with self._write() as con, transaction(con):
            q.finish_stage_run(con, stage_run_id, status, artifact_id=artifact_id, error=redact_text(error))

    def record_reuse(self, run_id: str, stage: str, artifact_id: str, family: str | None = None) -> str:
        """Record that ``run_id`` reuses an existing artifact for ``stage`` instead of
        recomputing it; return the new stage run id (status ``reused``).

        Raises:
            ValueError: Unknown run or artifact id.
        """
        with self._write() as con, transaction(con):
            if not q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [run_id]):
                raise ValueError(f"unknown run {run_id!r}")
            if q.get_artifact(con, artifact_id) is None:
                raise ValueError(f"unknown artifact {artifact_id!r}")
            return q.insert_stage_run(con, run_id, stage, status="reused", artifact_id=artifact_id, family=family)

    def stage_runs_for(self, run_id: str) -> list[StageRunRecord]:
        """Every stage attempt of a run, in the order they started."""
        with self._read() as con:
            return q.stage_runs_for(con, run_id)

    # --- artifacts --------------------------------------------------------------------

    def save_artifact(self, write: ArtifactWrite) -> ArtifactRecord:
        """Store an artifact, its lineage, its checks and (optionally) finish its stage run,
        all in one transaction: on any failure nothing of it is stored.

        The version is the next one for ``(run_id, stage)``; ``content_hash`` is the sha256 of
        the canonical JSON of the content.

        Raises:
            ValueError: Content or check details are not JSON-serialisable, a parent artifact
                or the run is unknown, or the stage run id is unknown.
        """
        with self._write() as con:
            with transaction(con):
                artifact_id = self._insert_artifact(con, write)
            record = q.get_artifact(con, artifact_id)
        assert record is not None
        return record

    def save_edit(self, write: ArtifactWrite, review: ReviewWrite, *, diff: str) -> tuple[ArtifactRecord, ReviewRecord]:
        """Store a reviewer's edited version and the ``edit`` review of the judged version, in one
        transaction: the judged version becomes ``superseded`` (unless approved), the edit is the
        new live version.

        Raises:
            ValueError: As :meth:`save_artifact`, or the judged artifact is unknown.
        """
        with self._write() as con:
            with transaction(con):
                artifact_id = self._insert_artifact(con, write)
                review_id = rq.insert_review(con, review.model_copy(update={"edit_diff": diff}),
                                             result_artifact_id=artifact_id)
            return q.get_artifact(con, artifact_id), rq.get_review(con, review_id)

    def _insert_artifact(self, con, write: ArtifactWrite) -> str:
        content_json = q.to_json(write.content, what=f"content of the {write.stage} artifact")
        details_json = [q.to_json(c.details, what=f"details of check {c.name!r}") for c in write.checks]
        stage_status = write.stage_status
        stage_error = write.stage_error
        if write.stage_run_id and stage_status is None:
            failures = blocking_failures(write.checks)
            stage_status = "failed" if failures else "succeeded"
            if failures and stage_error is None:
                stage_error = "; ".join(f"{c.name}: {c.message}" for c in failures)
        if not q.fetch_one(con, "SELECT id FROM runs WHERE id = ?", [write.run_id]):
            raise ValueError(f"unknown run {write.run_id!r}")
        missing = q.missing_artifacts(con, write.parents)
        if missing:
            raise ValueError(f"unknown parent artifact(s): {', '.join(missing)}")
        artifact_id, _ = q.insert_artifact(
            con, run_id=write.run_id, stage=write.stage, family=write.family, kind=write.kind,
            content_json=content_json, content_sha=q.content_hash(write.content),
            input_key=write.input_key, template_id=write.template_id,
            template_hash=write.template_hash, model=write.model, status=write.status)
        if write.supersede_previous:
            q.supersede_earlier(con, write.run_id, write.stage, artifact_id)
        q.insert_edges(con, artifact_id, write.parents)
        q.insert_validations(con, artifact_id, write.checks, details_json)
        if write.rows is not None:
            q.insert_dataset_rows(con, artifact_id, write.rows, write.row_id_field)
        if write.funnel:
            q.insert_funnel(con, artifact_id, write.run_id, write.stage, write.funnel, family=write.family)
        if write.stage_run_id:
            q.finish_stage_run(con, write.stage_run_id, stage_status, artifact_id=artifact_id,
                               error=redact_text(stage_error))
        return artifact_id

    def dataset_rows(self, artifact_id: str) -> list[dict[str, Any]]:
        """Rows stored with a dataset artifact, in order."""
        with self._read() as con:
            return q.dataset_rows(con, artifact_id)

    def funnel_for(self, artifact_id: str) -> list[FunnelRow]:
        """Funnel rows stored with a hardening artifact, in the order the stage recorded them."""
        with self._read() as con:
            return q.funnel_rows(con, artifact_id)

    def find_reusable_artifact(self, stage: str, input_key: str) -> ArtifactRecord | None:
        """The validated or approved artifact of ``stage`` built from ``input_key``, from any run
        (approved first, then newest); None when the stage must be computed."""
        with self._read() as con:
            found = q.artifacts_where(
                con, "stage = ? AND input_key = ? AND list_contains(?, status) "
                     "ORDER BY status = 'approved' DESC, created_at DESC, version DESC LIMIT 1",
                [stage, input_key, list(REUSABLE_STATUSES)])
        return found[0] if found else None

    def get_artifact(self, artifact_id: str) -> ArtifactRecord:
        """The artifact with this id, or the only one whose id starts with it.

        Raises:
            UserError: No artifact matches, or several do.
        """
        key = artifact_id.strip()
        with self._read() as con:
            found = q.artifacts_where(con, "id = ?", [key]) or q.artifacts_where(
                con, "starts_with(id, ?) OR starts_with(id, 'a-' || ?) ORDER BY id LIMIT 6", [key, key])
        if not found:
            raise UserError(f"no artifact matches {artifact_id!r} in {self.path}")
        if len(found) > 1:
            raise UserError(f"artifact id prefix {artifact_id!r} is ambiguous (matches "
                            f"{', '.join(a.id for a in found[:5])}); type more characters")
        return found[0]

    def artifact_for_stage(self, run_id: str, stage: str) -> ArtifactRecord | None:
        """The artifact recorded on the run's latest attempt of ``stage`` that recorded one,
        whether produced by the run or reused from an earlier one; None if there is none."""
        with self._read() as con:
            row = con.execute(
                "SELECT artifact_id FROM stage_runs WHERE run_id = ? AND stage = ? "
                "AND artifact_id IS NOT NULL ORDER BY attempt DESC LIMIT 1", [run_id, stage]).fetchone()
            return q.get_artifact(con, row[0]) if row else None

    def artifacts_for_run(self, run_id: str, stage: str | None = None) -> list[ArtifactRecord]:
        """Every artifact version the run produced (not reused ones), oldest first."""
        with self._read() as con:
            return q.artifacts_where(
                con, "run_id = ? AND (? IS NULL OR stage = ?) ORDER BY created_at, stage, version",
                [run_id, stage, stage])

    def validations_for(self, artifact_id: str) -> list[ValidationRecord]:
        """Check results stored with an artifact, in the order the checks ran."""
        with self._read() as con:
            return q.validations_for(con, artifact_id)

    def parents_of(self, artifact_id: str) -> list[ArtifactRecord]:
        """The artifacts this one was built from directly."""
        with self._read() as con:
            return q.artifacts_where(
                con, "id IN (SELECT parent FROM artifact_edges WHERE child = ?) ORDER BY created_at, id",
                [artifact_id])

    def descendants_of(self, artifact_id: str) -> list[ArtifactRecord]:
        """Every artifact built, directly or transitively, from this one (oldest first)."""
        with self._read() as con:
            return [ArtifactRecord(**r) for r in q.fetch_dicts(con, q.DESCENDANTS_SQL, [artifact_id])]

    def set_artifact_status(self, artifact_id: str, status: ArtifactStatus) -> None:
        """Change an artifact's status (reviews go through :meth:`record_review` instead).

        Raises:
            ValueError: Unknown status or artifact id, or the artifact is approved (final).
        """
        require(status, ArtifactStatus, "artifact status")
        with self._write() as con, transaction(con):
            current = q.get_artifact(con, artifact_id)
            if current is None:
                raise ValueError(f"unknown artifact {artifact_id!r}")
            if current.status == "approved" and status != "approved":
                raise ValueError(f"artifact {artifact_id} is approved; an approval is final (store an edited version instead)")
            con.execute("UPDATE artifacts SET status = ? WHERE id = ?", [status, artifact_id])

    # --- reviews ----------------------------------------------------------------------

    def record_review(self, review: ReviewWrite) -> ReviewRecord:
        """Store a decision on an artifact version in one transaction: the review row, the
        artifact's new status (approve → approved, reject → rejected; an approved version never
        changes) and the closing of the review request it answers."""
        with self._write() as con:
            with transaction(con):
                review_id = rq.insert_review(con, review)
            return rq.get_review(con, review_id)

    def reviews_for(self, artifact_id: str) -> list[ReviewRecord]:
        """Reviews of an artifact version, oldest first."""
        with self._read() as con:
            return rq.reviews_where(con, "artifact_id = ? ORDER BY created_at", [artifact_id])

    def reviews_for_run(self, run_id: str) -> list[ReviewRecord]:
        """Every review decision taken in a run, oldest first."""
        with self._read() as con:
            return rq.reviews_where(con, "run_id = ? ORDER BY created_at, id", [run_id])

    def open_review_request(self, run_id: str, stage: str, artifact_id: str, *, flow_run_id: str | None,
                            pause_key: str | None) -> ReviewRequestRecord:
        """Record that the run now waits at the gate after ``stage``; the run becomes
        ``awaiting_review`` in the same transaction."""
        with self._write() as con:
            with transaction(con):
                request_id = rq.insert_request(con, run_id, stage, artifact_id, flow_run_id, pause_key)
                con.execute("UPDATE runs SET status = 'awaiting_review', error = NULL, updated_at = ? WHERE id = ?",
                            [q.now(), run_id])
            return rq.requests_where(con, "id = ?", [request_id])[0]

    def close_review_request(self, request_id: str, status: ReviewRequestStatus) -> None:
        """Mark an open request answered or expired (no-op when already closed)."""
        require(status, ReviewRequestStatus, "review request status")
        with self._write() as con, transaction(con):
            rq.close_request(con, request_id, status)

    def mark_answered_via(self, request_id: str, source: ReviewSource) -> None:
        """Note who is about to answer an open request (the Prefect resume carries no sender)."""
        require(source, ReviewSource, "review source")
        with self._write() as con, transaction(con):
            con.execute("UPDATE review_requests SET answered_via = ? WHERE id = ?", [source, request_id])

    def review_requests(self, run_id: str | None = None, *, open_only: bool = False) -> list[ReviewRequestRecord]:
        """Review requests of one run (or all runs), newest first."""
        with self._read() as con:
            return rq.requests_where(
                con, "(? IS NULL OR run_id = ?) AND (NOT ? OR status = 'open') ORDER BY opened_at DESC, id",
                [run_id, run_id, open_only])
