-- Review gates (issue 4). `reviews` was created empty by 001 and never written by a released
-- version; it is rebuilt (data copied) because DuckDB cannot ALTER a table that has an index.
-- Each decision now names the stage, the artifact version judged, where it came from (ui, cli,
-- auto) and, for an edit, the new artifact version it produced.
CREATE TABLE reviews_v2 (
    id                  TEXT PRIMARY KEY,
    artifact_id         TEXT NOT NULL,             -- the version the reviewer judged
    run_id              TEXT NOT NULL,
    stage               TEXT,
    artifact_version    INTEGER,
    decision            TEXT NOT NULL,             -- approve, reject, edit, needs_review, refused, timeout
    reviewer            TEXT,
    source              TEXT,                      -- ui, cli, auto
    comment             TEXT,                      -- feedback on reject; the reason for needs_review/refused
    edit_diff           TEXT,                      -- unified diff generated → edited
    result_artifact_id  TEXT,                      -- the edited version an edit stored
    created_at          TIMESTAMPTZ NOT NULL
);
INSERT INTO reviews_v2 (id, artifact_id, run_id, decision, reviewer, comment, edit_diff, created_at)
    SELECT id, artifact_id, run_id, decision, reviewer, comment, edit_diff, created_at FROM reviews;
DROP INDEX reviews_artifact_idx;
DROP TABLE reviews;
ALTER TABLE reviews_v2 RENAME TO reviews;
CREATE INDEX reviews_artifact_idx ON reviews (artifact_id);
CREATE INDEX reviews_run_idx ON reviews (run_id);

-- A gate waiting for a decision. `open` while the flow run is paused; the headless
-- `sopforge review` commands find the Prefect flow run and pause key here.
CREATE TABLE review_requests (
    id            TEXT PRIMARY KEY,
    run_id        TEXT NOT NULL,
    stage         TEXT NOT NULL,
    artifact_id   TEXT NOT NULL,
    flow_run_id   TEXT,
    pause_key     TEXT,
    answered_via  TEXT,                            -- ui (the Prefect form) or cli (sopforge review)
    status        TEXT NOT NULL,                   -- open, answered, expired
    opened_at     TIMESTAMPTZ NOT NULL,
    closed_at     TIMESTAMPTZ
);
CREATE INDEX review_requests_run_idx ON review_requests (run_id);
