-- Hyperparameter tuning jobs and their trials. The store is the tuner's single source of truth:
-- a search is rebuilt from these rows after a restart, never from a pickled sampler. A trial's
-- row is written before its training job is submitted, under a name fixed at that moment, so
-- a tuner that dies in between submits that same job when it resumes (never a second one).
-- A trial is one proposal of the search (numbered from 0); a retry after a lost host or an
-- internal error keeps the trial and its number, runs a new training job (``tries`` + 1) and
-- keeps the earlier jobs' names and failures in ``earlier_jobs``.
CREATE TABLE tuning_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,                   -- the declared tuning job, as JSON
    code_uri TEXT NOT NULL,                 -- the trials' packed source
    status TEXT NOT NULL,                   -- InProgress, Stopping, Completed, Stopped, Failed
    creation_time REAL NOT NULL,
    last_modified_time REAL NOT NULL,
    end_time REAL,
    failure_reason TEXT,
    completion_reason TEXT,                 -- why it ended (max jobs reached, target reached...)
    stop_requested INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX tuning_jobs_by_status ON tuning_jobs (status);

CREATE TABLE tuning_trials (
    tuning_job TEXT NOT NULL REFERENCES tuning_jobs (name) ON DELETE CASCADE,
    number INTEGER NOT NULL,                -- 0, 1, ... in the order they were proposed
    training_job TEXT NOT NULL UNIQUE,      -- the training job of its current try
    hyperparameters TEXT NOT NULL,          -- the tuned values, typed, as JSON
    status TEXT NOT NULL,                   -- Pending, InProgress, Completed, Failed, Stopped
    objective REAL,                         -- the last objective value the job reported
    intermediate TEXT NOT NULL DEFAULT '[]',-- objective values in order (one per epoch)
    failure_reason TEXT,
    retryable INTEGER NOT NULL DEFAULT 0,   -- a failure another try may cure (a lost host)
    tries INTEGER NOT NULL DEFAULT 1,
    earlier_jobs TEXT NOT NULL DEFAULT '[]',-- [{"name", "failure_reason"}] of earlier tries
    creation_time REAL NOT NULL,
    end_time REAL,
    PRIMARY KEY (tuning_job, number)
);
