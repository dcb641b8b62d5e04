-- Tags of the SageMaker API's resources (AddTags, ListTags, DeleteTags, CreateTrainingJob's
-- Tags): one row per key of a resource. ``kind`` is the resource type of its ARN
-- (``training-job``, ``hyper-parameter-tuning-job``), ``name`` the resource's own name as stored
-- (the ARN spells it in lower case). Tags are kept for as long as their resource is.
CREATE TABLE tags (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (kind, name, key)
);
