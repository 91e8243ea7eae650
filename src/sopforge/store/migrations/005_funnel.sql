-- The funnel of the hardening stages (issue 5): per artifact, how many distractors and
-- manipulations of each type were generated, verified, retried, dropped and kept. The artifact's
-- content holds the same rows plus the reason of every drop; this table makes the counts
-- queryable across runs with plain SQL, e.g.
--   SELECT item_type, sum(kept), sum(generated) FROM funnel WHERE component = 'sop_variant' GROUP BY 1
-- It is written in the same transaction as the artifact.
CREATE TABLE funnel (
    artifact_id  TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    stage        TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,      -- row order as the stage recorded it
    component    TEXT NOT NULL,         -- distractor_tool, distractor_field, sop_variant, instruction_document, dialogue, compliance_pair
    item_type    TEXT NOT NULL,
    generated    INTEGER NOT NULL,
    verified     INTEGER NOT NULL,
    retried      INTEGER NOT NULL,
    dropped      INTEGER NOT NULL,
    kept         INTEGER NOT NULL,
    PRIMARY KEY (artifact_id, ordinal)
);
CREATE INDEX funnel_run_idx ON funnel (run_id);
