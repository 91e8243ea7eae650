-- Speed and spend (issue 12).
-- Prompt caching: cached_tokens (already there) are the prompt tokens a provider read from its
-- cache; cache_write_tokens those Anthropic wrote to it (billed at 1.25x). Both are part of
-- input_tokens, so the cache-hit share of a stage is plain SQL:
--   SELECT stage, sum(cached_tokens) / sum(input_tokens) FROM llm_calls WHERE run_id = ? GROUP BY stage
-- Batch APIs (--batch): batch_id names the provider batch that answered a call (half price).
ALTER TABLE llm_calls ADD COLUMN cache_write_tokens BIGINT DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN batch_id TEXT;
-- One row per batch job submitted to a provider (OpenAI Batch API, Anthropic Message Batches).
-- A later run of the same stage (after a crash or a stop) finds the job by the hash of its
-- requests and polls it instead of submitting (and paying for) the same requests again.
CREATE TABLE batch_jobs (
    id             TEXT PRIMARY KEY,        -- the provider's batch id
    run_id         TEXT NOT NULL,           -- the run that submitted it
    stage          TEXT NOT NULL,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    requests_hash  TEXT NOT NULL,           -- sha256 of the sorted request hashes in the job
    requests       JSON NOT NULL,           -- the request hashes in the job (each is its custom_id)
    status         TEXT NOT NULL,           -- submitted, ended (results collected), failed, expired
    error          TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX batch_jobs_requests_idx ON batch_jobs (requests_hash);
