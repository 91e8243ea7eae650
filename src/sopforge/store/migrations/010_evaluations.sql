-- Agent evaluation (issue 23): `sopforge eval RUN` results, and the tool calls of agent turns.
-- tool_calls: a model answer's native tool calls ([{id, name, arguments, raw_arguments}]), NULL for
-- text answers; the response cache returns them with the text.
ALTER TABLE llm_calls ADD COLUMN tool_calls JSON;
-- One row per evaluation of a generated domain. options_key hashes every option that changes a
-- result: `sopforge eval` with the same options resumes the newest unfinished evaluation with that key.
-- artifacts lists the artifact ids evaluated (the run's package artifacts): lineage to what was scored.
CREATE TABLE eval_runs (
    id           TEXT PRIMARY KEY,          -- e-xxxxxxxx
    run_id       TEXT NOT NULL,             -- the generated domain's run
    options_key  TEXT NOT NULL,
    options      JSON NOT NULL,             -- families, provider, model, agent, limit, steps, temperature...
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    agent        TEXT NOT NULL,             -- fc or react
    artifacts    JSON NOT NULL,             -- artifact ids evaluated
    export_dir   TEXT NOT NULL,
    status       TEXT NOT NULL,             -- running, succeeded, failed, interrupted, pending (exchange)
    error        TEXT,
    items_total  INTEGER,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ
);
-- One row per finished item: one task for one agent (the model's, agent = fc/react, or a baseline).
-- A row is never rewritten by a resumed evaluation (unless --retry-errors), so nothing is paid twice.
-- output holds the full trajectory (tool calls with arguments, results, state changes) and the answer;
-- score the per-item metrics; error one line when the item failed (it is then scored as a failure).
CREATE TABLE eval_items (
    eval_id        TEXT NOT NULL,
    family         TEXT NOT NULL,
    suite          TEXT NOT NULL,           -- sop_bench, teller_graph, tod_task1, ...
    agent          TEXT NOT NULL,
    item_id        TEXT NOT NULL,
    status         TEXT NOT NULL,           -- done or error
    output         JSON,
    score          JSON,
    error          TEXT,
    llm_calls      INTEGER NOT NULL DEFAULT 0,
    input_tokens   BIGINT NOT NULL DEFAULT 0,
    output_tokens  BIGINT NOT NULL DEFAULT 0,
    cost_usd       DOUBLE NOT NULL DEFAULT 0,
    latency_ms     DOUBLE NOT NULL DEFAULT 0,
    finished_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (eval_id, family, suite, agent, item_id)
);
