-- Dataset rows in their own table (DESIGN "Data model"), so users can query cases with plain SQL:
--   SELECT data->>'$.refills_remaining' FROM dataset_rows WHERE artifact_id = 'a-…'
-- The artifact's content keeps the full Dataset model; this table is its row-level view,
-- written in the same transaction.
CREATE TABLE dataset_rows (
    artifact_id  TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,      -- 0-based position in the dataset
    row_id       TEXT,                  -- value of the schema's id field, when it has one
    data         JSON NOT NULL,
    PRIMARY KEY (artifact_id, ordinal)
);
