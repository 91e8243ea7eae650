-- 009_task_expectations (issue 16): the computed expectations of every task, one row per task, as a
-- view over the ground-truth artifacts (the reference stage of the sop_tools family), so a user asks
-- plain SQL without unpacking the artifact's JSON, e.g.
--   SELECT task_id, expected_path, expected_writes FROM task_expectations WHERE run_id = 'r-...'
--   SELECT array_to_string(expected_path, ' > ') AS path, count(*) FROM task_expectations
--     WHERE artifact_id = 'a-...' GROUP BY 1 ORDER BY 2 DESC
-- expected_state is {table: {record key: record}} (what the expected calls leave on a fresh Manager);
-- order_constraints lists [before, after] tool pairs the SOP orders on the path. Artifacts written
-- before this issue have no such keys: their rows show an empty path, state and constraints.
CREATE VIEW task_expectations AS
SELECT
    a.run_id,
    a.id AS artifact_id,
    a.version,
    a.status,
    t.task ->> 'task_id' AS task_id,
    CAST(t.task ->> 'row_index' AS INTEGER) AS row_index,
    t.task -> 'inputs' AS inputs,
    t.task -> 'expected_outputs' AS expected_outputs,
    CAST(coalesce(t.task -> 'expected_path', '[]') AS VARCHAR[]) AS expected_path,
    json_array_length(t.task -> 'expected_calls') AS num_expected_calls,
    coalesce(t.task -> 'expected_state', '{}') AS expected_state,
    json_keys(coalesce(t.task -> 'expected_state', '{}')) AS expected_writes,
    coalesce(t.task -> 'order_constraints', '[]') AS order_constraints
FROM artifacts a, LATERAL (SELECT unnest(json_extract(a.content, '$.tasks[*]')) AS task) t
WHERE a.stage = 'reference';
