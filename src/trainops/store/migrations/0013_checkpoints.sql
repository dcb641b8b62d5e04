-- Checkpoint records: each restore, last sync and failed or incomplete sync a host agent reports
-- (agent event kind ``checkpoint``). Read by ``describe``, the job's log view and the cost
-- advice (the measured checkpoint write time and the age of what a restart resumed from).
CREATE TABLE checkpoints (
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    host TEXT NOT NULL,
    kind TEXT NOT NULL,                     -- synced, restored, sync_failed, sync_incomplete
    at REAL NOT NULL,                       -- when it happened (seconds since the epoch)
    files INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    newest_write REAL,                      -- the newest file's write time
    write_seconds REAL,                     -- the script's first write to last close
    upload_seconds REAL,
    reason TEXT                             -- why incomplete or failed; which checkpoint restored
);

CREATE INDEX checkpoints_by_job ON checkpoints (job, at);
