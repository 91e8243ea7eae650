"""sopforge.store: the DuckDB-backed store of runs, artifacts, lineage, checks and LLM calls.

``Store`` is the only code that touches DuckDB. Its tables (``runs``, ``stage_runs``,
``artifacts``, ``artifact_edges``, ``llm_calls``, ``validations``, ``reviews``, ``review_requests``, ``dataset_rows`` and
``schema_migrations``) are a documented interface that users query with plain SQL.
"""

from .queries import content_hash
from .records import (
    REUSABLE_STATUSES,
    ArtifactRecord,
    ArtifactStatus,
    ArtifactWrite,
    ReviewRecord,
    ReviewRequestRecord,
    ReviewWrite,
    RunRecord,
    RunStatus,
    RunSummary,
    StageRunRecord,
    StageStatus,
    StageSummary,
    ValidationRecord,
)
from .base import release_connections
from .connection import linger_reads
from .store import DEFAULT_LOCK_TIMEOUT, Store

__all__ = [
    "linger_reads",
    "release_connections",
    "DEFAULT_LOCK_TIMEOUT",
    "REUSABLE_STATUSES",
    "ArtifactRecord",
    "ArtifactStatus",
    "ArtifactWrite",
    "ReviewRecord",
    "ReviewRequestRecord",
    "ReviewWrite",
    "RunRecord",
    "RunStatus",
    "RunSummary",
    "StageRunRecord",
    "StageStatus",
    "StageSummary",
    "Store",
    "ValidationRecord",
    "content_hash",
]
