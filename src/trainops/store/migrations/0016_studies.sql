-- Scaling studies (``trainops study``): one row per study and one per configuration it ran.
-- The CLI records them through the API as the study runs, so every client sees the same study.
-- ``status`` is InProgress, Completed, Failed or Stopped; a row's figures are null until its
-- job has ended (and stay null where its job had none to give).
CREATE TABLE studies (
    name TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    status TEXT NOT NULL,
    target_metric TEXT,
    creation_time REAL NOT NULL,
    last_modified_time REAL NOT NULL
);
CREATE TABLE study_rows (
    study TEXT NOT NULL REFERENCES studies (name) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    label TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    instance_count INTEGER NOT NULL,
    processes_per_host INTEGER NOT NULL,
    job_name TEXT,
    status TEXT NOT NULL,
    throughput REAL,
    time_to_target_s REAL,
    billable_seconds REAL,
    cost_usd REAL,
    efficiency REAL,
    PRIMARY KEY (study, position)
);
CREATE INDEX studies_by_time ON studies (creation_time DESC);
