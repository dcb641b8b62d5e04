-- Schema version 8: log lines and metric values are stored in chunks, one row per run of lines
-- (values) of one event, instead of one row per line (value). A chatty script's 200,000 lines
-- and 400,000 metric points were 600,000 rows, each a B-tree insert into a table and an index:
-- most of what the control plane did between a script's exit and its job's end. A chunk keeps
-- what its lines (values) share once; each line still has a cursor of its own.
-- Old rows become chunks of one line (value) with their cursors and ids as they were.

CREATE TABLE log_chunks (
    first INTEGER PRIMARY KEY,          -- the cursor of its first line; the others follow it
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,               -- the sequence number of its first line
    ts REAL NOT NULL,
    stream TEXT NOT NULL,
    rank INTEGER,
    count INTEGER NOT NULL,             -- lines in the chunk, at least 1
    lines TEXT NOT NULL                 -- count = 1: the line; more: the lines joined by "\n"
);
CREATE INDEX log_chunks_by_job ON log_chunks (job, first);
INSERT INTO log_chunks (first, job, host, attempt, seq, ts, stream, rank, count, lines)
    SELECT cursor, job, host, attempt, seq, ts, stream, rank, 1, line FROM logs ORDER BY cursor;

-- The last cursor handed out: cursors never go back, even past chunks deleted with their job.
CREATE TABLE log_cursor (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    last INTEGER NOT NULL
);
INSERT INTO log_cursor (id, last) VALUES (0, MAX(
    COALESCE((SELECT MAX(cursor) FROM logs), 0),
    COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'logs'), 0)
));
DROP TABLE logs;

CREATE TABLE metric_chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,               -- the sequence number of its first value
    name TEXT NOT NULL,
    ts REAL NOT NULL,
    count INTEGER NOT NULL,             -- values in the chunk, at least 1
    value REAL NOT NULL,                -- its last value (the only one when count = 1)
    vals BLOB                           -- count > 1: every value, little-endian float64, in order
);
CREATE INDEX metric_chunks_by_job ON metric_chunks (job, name, ts);
INSERT INTO metric_chunks (id, job, host, attempt, seq, name, ts, count, value, vals)
    SELECT id, job, host, attempt, seq, name, ts, 1, value, NULL FROM metrics ORDER BY id;
DROP TABLE metrics;
