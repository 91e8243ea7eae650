-- The process that owns a run (issue 15). A run whose process was killed used to stay 'running'
-- for ever, and `sopforge rerun` refused it without --force. With its owner recorded, a reader can
-- tell that the process is gone and show the run as 'interrupted', resumable without --force
-- (sopforge.store.owner decides). Runs written before this migration have no owner and keep their
-- status. Stage attempts cut short the same way become 'interrupted' too.
ALTER TABLE runs ADD COLUMN owner_host TEXT;           -- socket.gethostname() of the owning process
ALTER TABLE runs ADD COLUMN owner_pid INTEGER;         -- its pid
ALTER TABLE runs ADD COLUMN owner_started TEXT;        -- its start time (/proc/<pid>/stat field 22): pids are reused
ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMPTZ;  -- refreshed every 30 s while the owner runs (other hosts)
