-- Answers that failed a stage's validation after every re-ask are kept (their cost is real and
-- their raw text is evidence) but must not be served from the response cache: re-running the
-- failed stage should sample the model again, not replay the same rejected answers.
ALTER TABLE llm_calls ADD COLUMN rejected BOOLEAN DEFAULT FALSE;
