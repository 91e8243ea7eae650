-- Benchmark families (issue 11): a row that belongs to one family names it, so per-family
-- questions are plain SQL, e.g.
--   SELECT family, count(*), sum(cost_usd) FROM llm_calls GROUP BY family
-- Shared stages (the business context) belong to no family: their rows keep NULL.
-- Rows written before families existed all came from the SOP-Bench/TELLER/TOD-ProcBench chain,
-- now the sop_tools family; they are backfilled from their stage names.
ALTER TABLE artifacts ADD COLUMN family TEXT;
ALTER TABLE stage_runs ADD COLUMN family TEXT;
ALTER TABLE llm_calls ADD COLUMN family TEXT;
ALTER TABLE funnel ADD COLUMN family TEXT;
UPDATE artifacts SET family = 'sop_tools' WHERE stage <> 'context';
UPDATE stage_runs SET family = 'sop_tools' WHERE stage <> 'context';
UPDATE llm_calls SET family = 'sop_tools' WHERE stage <> 'context';
UPDATE funnel SET family = 'sop_tools';
