"""Pydantic models for rows of the sopforge store and for what callers write into it.

These are the types the rest of sopforge sees; nothing outside ``sopforge.store`` handles
DuckDB rows. Status vocabularies are enforced here rather than in SQL (see migration 001).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from sopforge.checks import CheckResult
from sopforge.funnel import FunnelRow

RunStatus = Literal["running", "awaiting_review", "succeeded", "failed", "needs_review", "cancelled", "interrupted"]
ReviewDecisionName = Literal["approve", "reject", "edit", "waive", "needs_review", "refused", "timeout"]
ReviewSource = Literal["ui", "cli", "auto"]
ReviewRequestStatus = Literal["open", "answered", "expired"]
StageStatus = Literal["running", "succeeded", "failed", "reused", "interrupted"]
#: Run statuses that need a live process; with the process gone the run is ``interrupted``.
LIVE_STATUSES: tuple[RunStatus, ...] = ("running", "awaiting_review")
ArtifactStatus = Literal["draft", "validated", "approved", "rejected", "superseded"]

#: Artifact statuses a later run may reuse instead of recomputing.
REUSABLE_STATUSES: tuple[ArtifactStatus, ...] = ("validated", "approved")


class RunRecord(BaseModel):
    """One row of ``runs``: a single attempt to build a benchmark from a theme."""

    id: str = Field(description="Run id, 'r-' followed by 10 hex digits.")
    theme: str = Field(description="Business theme as the user typed it.")
    theme_slug: str = Field(description="Filesystem/call-key friendly form of the theme.")
    config: dict[str, Any] = Field(default_factory=dict, description="Provider, model and parameters used; never secrets.")
    status: RunStatus = Field(description="running, awaiting_review (paused at a gate), succeeded, failed, needs_review, "
                                          "cancelled or interrupted (its process is gone; resumable).")
    error: str | None = Field(None, description="One-line reason when the run failed or stopped.")
    flow_run_id: str | None = Field(None, description="Prefect flow run id, when run under Prefect.")
    created_at: datetime = Field(description="When the run was created (UTC).")
    updated_at: datetime = Field(description="Last status change (UTC).")
    owner_host: str | None = Field(None, description="Host of the process that executes (or executed) the run.")
    owner_pid: int | None = Field(None, description="Its process id.")
    owner_started: str | None = Field(None, description="Its start time as the OS reports it (pids are reused).")
    heartbeat_at: datetime | None = Field(None, description="Last sign of life from that process (UTC).")


class StageRunRecord(BaseModel):
    """One row of ``stage_runs``: one attempt at one stage within a run."""

    id: str = Field(description="Stage run id, 's-' followed by 12 hex digits.")
    run_id: str = Field(description="Run this attempt belongs to.")
    stage: str = Field(description="Stage name, e.g. 'sop'.")
    family: str | None = Field(None, description="Benchmark family of the stage; None for shared stages (context).")
    attempt: int = Field(description="1, 2, ... per (run, stage).")
    status: StageStatus = Field(description="running, succeeded, failed, reused or interrupted (its process is gone).")
    artifact_id: str | None = Field(None, description="Artifact produced (or reused) by this attempt.")
    error: str | None = Field(None, description="Why the attempt failed.")
    started_at: datetime = Field(description="When the attempt started (UTC).")
    finished_at: datetime | None = Field(None, description="When it finished; None while running.")
    llm_calls: int = Field(0, description="LLM calls recorded for this run and stage while the attempt ran.")
    input_tokens: int = Field(0, description="Prompt tokens of those calls.")
    output_tokens: int = Field(0, description="Completion tokens of those calls.")
    cost_usd: float = Field(0.0, description="Estimated cost of those calls.")


class ArtifactRecord(BaseModel):
    """One row of ``artifacts``: a versioned, hashed output of a stage."""

    id: str = Field(description="Artifact id, 'a-' followed by 12 hex digits.")
    run_id: str = Field(description="Run that produced the artifact.")
    stage: str = Field(description="Stage that produced it.")
    family: str | None = Field(None, description="Benchmark family of the stage; None for shared stages (context).")
    kind: str = Field(description="Artifact model name, e.g. 'SOPDocument'.")
    version: int = Field(description="1, 2, ... per (run_id, stage).")
    content: dict[str, Any] = Field(description="The artifact itself, as JSON.")
    content_hash: str = Field(description="sha256 of the canonical JSON of content.")
    input_key: str = Field(description="Hash of everything that determines the content (reuse key).")
    template_id: str | None = Field(None, description="Prompt template id used.")
    template_hash: str | None = Field(None, description="sha256 of that template's source.")
    model: str | None = Field(None, description="Model that produced it.")
    created_at: datetime = Field(description="When it was stored (UTC).")
    status: ArtifactStatus = Field(description="draft, validated, approved, rejected or superseded.")


class ValidationRecord(BaseModel):
    """One row of ``validations``: the result of one check on one artifact."""

    id: str = Field(description="Validation row id.")
    artifact_id: str = Field(description="Artifact that was checked.")
    ordinal: int = Field(description="Position of the check in the order it ran.")
    check_name: str = Field(description="Stable check id, e.g. 'schema.partitions_non_empty'.")
    passed: bool = Field(description="Whether the artifact satisfied the check.")
    severity: Literal["error", "warning"] = Field(description="error blocks downstream stages; warning is reported.")
    message: str = Field(description="One line a reviewer can act on.")
    details: dict[str, Any] = Field(default_factory=dict, description="Machine-readable specifics.")
    created_at: datetime = Field(description="When the result was stored (UTC).")

    def to_check(self) -> CheckResult:
        """The stored row as the ``CheckResult`` it was written from."""
        return CheckResult(name=self.check_name, passed=self.passed, severity=self.severity,
                           message=self.message, details=self.details)


class ReviewRecord(BaseModel):
    """One row of ``reviews``: a decision (human or automatic) on one artifact version."""

    id: str = Field(description="Review id.")
    artifact_id: str = Field(description="Artifact version judged.")
    run_id: str = Field(description="Run in which the review happened.")
    stage: str | None = Field(None, description="Stage of the artifact.")
    artifact_version: int | None = Field(None, description="Version of the artifact judged.")
    decision: ReviewDecisionName = Field(description="approve, reject, edit, waive (approved overruling a failed check; comment 'check: reason'), needs_review, refused (an unusable decision) or timeout.")
    reviewer: str | None = Field(None, description="Who decided ('auto' for the automatic gate).")
    source: ReviewSource | None = Field(None, description="ui (Prefect form), cli (sopforge review) or auto.")
    comment: str | None = Field(None, description="Feedback (fed to the regenerated stage on reject) or the reason.")
    edit_diff: str | None = Field(None, description="Unified diff from the judged version to the edited one.")
    result_artifact_id: str | None = Field(None, description="The new version an edit stored.")
    created_at: datetime = Field(description="When the decision was stored (UTC).")


class ReviewWrite(BaseModel):
    """A decision to store; ``Store.record_review`` applies it in one transaction."""

    artifact_id: str = Field(description="Artifact version judged.")
    run_id: str = Field(description="Run in which the review happened.")
    decision: ReviewDecisionName = Field(description="What was decided.")
    reviewer: str | None = Field(None, description="Who decided.")
    source: ReviewSource = Field("cli", description="Where the decision came from.")
    comment: str | None = Field(None, description="Feedback or reason.")
    edit_diff: str | None = Field(None, description="Diff of an edit.")
    close_request_id: str | None = Field(None, description="Open review request this decision answers.")


class ReviewRequestRecord(BaseModel):
    """One row of ``review_requests``: a gate waiting (or that waited) for a decision."""

    id: str = Field(description="Request id.")
    run_id: str = Field(description="Run paused at the gate.")
    stage: str = Field(description="Stage gated.")
    artifact_id: str = Field(description="Artifact version awaiting review.")
    flow_run_id: str | None = Field(None, description="Prefect flow run that is paused.")
    pause_key: str | None = Field(None, description="Prefect pause key of this gate.")
    answered_via: ReviewSource | None = Field(None, description="cli when `sopforge review` answered it; else the Prefect UI.")
    status: ReviewRequestStatus = Field(description="open, answered or expired.")
    opened_at: datetime = Field(description="When the gate paused (UTC).")
    closed_at: datetime | None = Field(None, description="When it was answered or expired.")


class ArtifactWrite(BaseModel):
    """Everything ``Store.save_artifact`` stores in one transaction."""

    run_id: str = Field(description="Run producing the artifact.")
    stage: str = Field(description="Stage producing it.")
    family: str | None = Field(None, description="Benchmark family of the stage; None for shared stages.")
    kind: str = Field(description="Artifact model name, e.g. 'SOPDocument'.")
    content: dict[str, Any] = Field(description="The artifact as JSON-serialisable data (model_dump(mode='json')).")
    input_key: str = Field(description="Hash of upstream content hashes, template hash, model and params.")
    template_id: str | None = Field(None, description="Prompt template id used.")
    template_hash: str | None = Field(None, description="sha256 of the template source.")
    model: str | None = Field(None, description="Model that produced the content.")
    status: ArtifactStatus = Field("validated", description="Initial status; usually 'validated' or 'draft'.")
    parents: list[str] = Field(default_factory=list, description="Ids of the upstream artifacts it was built from.")
    checks: list[CheckResult] = Field(default_factory=list, description="Check results to store with it.")
    stage_run_id: str | None = Field(None, description="Stage run to finish in the same transaction, if any.")
    stage_status: Literal["succeeded", "failed"] | None = Field(
        None, description="Status for stage_run_id; default: failed when a blocking check failed, else succeeded.")
    stage_error: str | None = Field(
        None, description="Error for stage_run_id; default: the blocking checks' messages when it failed.")
    rows: list[dict[str, Any]] | None = Field(
        None, description="Dataset rows to store in ``dataset_rows`` in the same transaction.")
    row_id_field: str | None = Field(None, description="Field of ``rows`` that identifies a row.")
    funnel: list[FunnelRow] | None = Field(
        None, description="Funnel counts of a hardening stage, stored in ``funnel`` in the same transaction.")
    supersede_previous: bool = Field(
        True, description="Mark earlier draft/validated/approved versions of the same (run, stage) 'superseded'.")


class StageSummary(BaseModel):
    """One stage of a run, as ``sopforge status`` shows it (its latest attempt)."""

    stage: str = Field(description="Stage name.")
    status: StageStatus = Field(description="Status of the latest attempt.")
    attempts: int = Field(description="Number of attempts recorded for this stage in the run.")
    artifact_id: str | None = Field(None, description="Artifact of the latest attempt, if any.")
    artifact_version: int | None = Field(None, description="Its version.")
    artifact_status: ArtifactStatus | None = Field(None, description="Its status.")
    checks_passed: int = Field(0, description="Checks on that artifact that passed.")
    checks_failed: int = Field(0, description="Checks on that artifact that failed (errors and warnings).")
    llm_calls: int = Field(0, description="LLM calls over all attempts of this stage in this run.")
    input_tokens: int = Field(0, description="Prompt tokens over all attempts.")
    output_tokens: int = Field(0, description="Completion tokens over all attempts.")
    cached_tokens: int = Field(0, description="Prompt tokens the provider read from its prompt cache.")
    cost_usd: float = Field(0.0, description="Estimated cost over all attempts (cache and batch prices applied).")
    error: str | None = Field(None, description="Error of the latest attempt.")

    @property
    def prompt_cache_share(self) -> float:
        """Share of the prompt tokens read from the provider's prompt cache."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


class RunSummary(BaseModel):
    """A run with its stages and totals."""

    run: RunRecord = Field(description="The run row.")
    stages: list[StageSummary] = Field(default_factory=list, description="Stages in the order they first started.")
    llm_calls: int = Field(0, description="LLM calls recorded for the run (any stage).")
    input_tokens: int = Field(0, description="Prompt tokens for the run.")
    output_tokens: int = Field(0, description="Completion tokens for the run.")
    cost_usd: float = Field(0.0, description="Estimated cost of the run.")
