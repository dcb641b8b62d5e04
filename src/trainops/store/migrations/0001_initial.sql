-- Schema version 1 of the trainops metadata store.
-- Released migrations are never edited: change the schema with a new, higher-numbered file.
-- Times are seconds since the epoch (UTC), as REAL.

CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,   -- submission order
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,                     -- JobSpec as JSON
    status TEXT NOT NULL,
    secondary_status TEXT NOT NULL,
    failure_reason TEXT,
    creation_time REAL NOT NULL,
    training_start_time REAL,
    training_end_time REAL,
    last_modified_time REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    max_attempts INTEGER NOT NULL DEFAULT 1,
    code_uri TEXT NOT NULL,
    output_prefix TEXT NOT NULL,
    agent_token_hash TEXT,                  -- sha256 of the agent token; the token is never stored
    stop_reason TEXT,
    stop_requested_at REAL,
    billable_seconds INTEGER,
    training_seconds INTEGER
);
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_by_creation ON jobs (creation_time);

CREATE TABLE transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    status TEXT NOT NULL,
    start_time REAL NOT NULL,
    end_time REAL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX transitions_by_job ON transitions (job, id);

CREATE TABLE hosts (
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    pid INTEGER,
    process_create_time REAL,
    root TEXT NOT NULL,
    state_dir TEXT NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    phase TEXT,
    outcome TEXT,
    exit_code INTEGER,
    failure_reason TEXT,
    exit_time REAL,
    resources TEXT NOT NULL DEFAULT '{}',   -- what the agent is told it has
    reservation TEXT NOT NULL DEFAULT '{}', -- the backend's own record of what it reserved
    processes TEXT NOT NULL DEFAULT '[]',   -- the host's workload processes, for clean-up
    PRIMARY KEY (job, host, attempt)
);
CREATE INDEX hosts_by_state ON hosts (state);

CREATE TABLE logs (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    stream TEXT NOT NULL,
    line TEXT NOT NULL,
    UNIQUE (job, host, attempt, seq)
);
CREATE INDEX logs_by_job ON logs (job, cursor);

CREATE TABLE metrics (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    host TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    ts REAL NOT NULL,
    value REAL NOT NULL,
    UNIQUE (job, host, attempt, seq)
);
CREATE INDEX metrics_by_job ON metrics (job, name, ts);

CREATE TABLE artifacts (
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    name TEXT NOT NULL,
    host TEXT NOT NULL DEFAULT '',          -- '' for job-level artifacts
    uri TEXT NOT NULL,
    PRIMARY KEY (job, name, host, uri)      -- a retried host keeps the logs of every attempt
);
