-- Jobs gain observation settings (profiler_config, rules, tensorboard_output_config): specs
-- stored before had none, so they get the empty values and stay complete JobSpec dumps.
-- Rules evaluated while a job runs keep one row each: SageMaker's RuleEvaluationStatus
-- (InProgress, NoIssuesFound, IssuesFound, Error, Stopped), a one-line detail, and the result
-- as JSON (evidence, recommendation, what each action did).
UPDATE jobs
SET spec = json_set(
    spec,
    '$.profiler_config', json('null'),
    '$.rules', json('[]'),
    '$.tensorboard_output_config', json('null')
)
WHERE json_type(spec, '$.rules') IS NULL;

CREATE TABLE rule_evaluations (
    job TEXT NOT NULL REFERENCES jobs (name) ON DELETE CASCADE,
    name TEXT NOT NULL,                     -- the rule configuration's name
    rule TEXT NOT NULL,                     -- the built-in rule it runs
    kind TEXT NOT NULL,                     -- profiler (debugger later)
    status TEXT NOT NULL,
    status_details TEXT NOT NULL DEFAULT '',
    last_modified_time REAL NOT NULL,
    result TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (job, name)
);
