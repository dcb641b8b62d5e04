-- Schema version 2: logs and metrics lose their UNIQUE (job, host, attempt, seq) index.
-- Each event is stored once by the hosts.acked_seq check, in the same transaction that stores
-- it (a resend at or below acked_seq is skipped); the index only made every insert a third
-- slower (a chatty script's 200,000 lines and 400,000 metric points are 600,000 rows).
-- The tables are rebuilt with their rows, cursors and ids as they were.

CREATE TABLE logs_v2 (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    stream TEXT NOT NULL,
    line TEXT NOT NULL
);
INSERT INTO logs_v2 (cursor, job, host, attempt, seq, ts, stream, line)
    SELECT cursor, job, host, attempt, seq, ts, stream, line FROM logs ORDER BY cursor;
-- AUTOINCREMENT numbers never go back, even past rows deleted with their job.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'logs_v2', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'logs_v2');
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'logs'), 0))
    WHERE name = 'logs_v2';
DROP TABLE logs;
ALTER TABLE logs_v2 RENAME TO logs;
CREATE INDEX logs_by_job ON logs (job, cursor);

CREATE TABLE metrics_v2 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    ts REAL NOT NULL,
    value REAL NOT NULL
);
INSERT INTO metrics_v2 (id, job, host, attempt, seq, name, ts, value)
    SELECT id, job, host, attempt, seq, name, ts, value FROM metrics ORDER BY id;
-- AUTOINCREMENT numbers never go back, even past rows deleted with their job.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'metrics_v2', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'metrics_v2');
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'metrics'), 0))
    WHERE name = 'metrics_v2';
DROP TABLE metrics;
ALTER TABLE metrics_v2 RENAME TO metrics;
CREATE INDEX metrics_by_job ON metrics (job, name, ts);
