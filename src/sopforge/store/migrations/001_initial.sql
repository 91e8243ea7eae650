-- 001_initial: the documented tables of the sopforge store.
--
-- Statuses are validated in Python (sopforge.store.records) rather than with CHECK
-- constraints, and there are no FOREIGN KEYs: DuckDB cannot ALTER or DROP constraints,
-- so adding a status or deleting old runs later would otherwise need a table rebuild.
-- Indexes sit only on columns that are never UPDATEd (DuckDB rewrites indexed rows on
-- update, which is slower and has historically hit over-eager uniqueness checks).
-- Timestamps are TIMESTAMPTZ written by Python in UTC.

CREATE TABLE runs (
    id           TEXT PRIMARY KEY,          -- 'r-' + 10 hex
    theme        TEXT NOT NULL,
    theme_slug   TEXT NOT NULL,
    config       JSON NOT NULL,             -- provider/model/params; never secrets
    status       TEXT NOT NULL,             -- running/succeeded/failed/needs_review/cancelled
    error        TEXT,
    flow_run_id  TEXT,                      -- Prefect flow run, when run under Prefect
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE stage_runs (
    id             TEXT PRIMARY KEY,        -- 's-' + 12 hex
    run_id         TEXT NOT NULL,
    stage          TEXT NOT NULL,
    attempt        INTEGER NOT NULL,        -- 1, 2, ... per (run_id, stage)
    status         TEXT NOT NULL,           -- running/succeeded/failed/reused
    artifact_id    TEXT,                    -- produced or reused artifact
    error          TEXT,
    started_at     TIMESTAMPTZ NOT NULL,
    finished_at    TIMESTAMPTZ,
    llm_calls      INTEGER NOT NULL DEFAULT 0,
    input_tokens   BIGINT NOT NULL DEFAULT 0,
    output_tokens  BIGINT NOT NULL DEFAULT 0,
    cost_usd       DOUBLE NOT NULL DEFAULT 0
);
CREATE INDEX stage_runs_run_stage_idx ON stage_runs (run_id, stage);

CREATE TABLE artifacts (
    id             TEXT PRIMARY KEY,        -- 'a-' + 12 hex
    run_id         TEXT NOT NULL,           -- the run that produced it
    stage          TEXT NOT NULL,
    kind           TEXT NOT NULL,           -- pydantic model name, e.g. 'SOPDocument'
    version        INTEGER NOT NULL,        -- 1, 2, ... per (run_id, stage)
    content        JSON NOT NULL,
    content_hash   TEXT NOT NULL,           -- sha256 of canonical JSON of content
    input_key      TEXT NOT NULL,           -- hash of everything that determines content
    template_id    TEXT,
    template_hash  TEXT,
    model          TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    status         TEXT NOT NULL            -- draft/validated/approved/rejected/superseded
);
CREATE INDEX artifacts_stage_input_key_idx ON artifacts (stage, input_key);
CREATE INDEX artifacts_run_stage_idx ON artifacts (run_id, stage);

CREATE TABLE artifact_edges (
    child   TEXT NOT NULL,                  -- artifact built from ...
    parent  TEXT NOT NULL,                  -- ... this upstream artifact
    PRIMARY KEY (child, parent)
);
CREATE INDEX artifact_edges_parent_idx ON artifact_edges (parent);

CREATE TABLE llm_calls (
    id                  TEXT PRIMARY KEY,
    run_id              TEXT,
    call_key            TEXT NOT NULL,
    request_hash        TEXT NOT NULL,
    stage               TEXT NOT NULL,
    attempt             INTEGER NOT NULL,
    template_id         TEXT,
    template_hash       TEXT,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    params              JSON NOT NULL,
    prompt              JSON NOT NULL,
    response            TEXT,
    raw                 JSON,
    input_tokens        BIGINT NOT NULL,
    output_tokens       BIGINT NOT NULL,
    cached_tokens       BIGINT NOT NULL,
    cost_usd            DOUBLE NOT NULL,
    latency_ms          DOUBLE NOT NULL,
    transport_attempts  INTEGER NOT NULL,
    error               TEXT,
    created_at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX llm_calls_request_hash_idx ON llm_calls (request_hash);
CREATE INDEX llm_calls_run_id_idx ON llm_calls (run_id);

CREATE TABLE validations (
    id          TEXT PRIMARY KEY,
    artifact_id TEXT NOT NULL,
    ordinal     INTEGER NOT NULL,           -- order the checks ran in
    check_name  TEXT NOT NULL,
    passed      BOOLEAN NOT NULL,
    severity    TEXT NOT NULL,              -- error/warning
    message     TEXT NOT NULL,
    details     JSON NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX validations_artifact_idx ON validations (artifact_id);

CREATE TABLE reviews (
    id           TEXT PRIMARY KEY,
    artifact_id  TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    decision     TEXT NOT NULL,             -- e.g. approve/reject/edit
    reviewer     TEXT,
    comment      TEXT,
    edit_diff    TEXT,                      -- diff of an edited artifact, as submitted
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX reviews_artifact_idx ON reviews (artifact_id);
