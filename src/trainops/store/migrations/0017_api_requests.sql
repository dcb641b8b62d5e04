-- What a SageMaker API request sent that the describe gives back as sent and the spec does not
-- keep (RoleArn, the training image, the hyperparameters as the SDK encoded them, ...): one row
-- per resource, ``kind`` the resource type of its ARN (``training-job``,
-- ``hyper-parameter-tuning-job``), ``name`` its name as stored, ``request`` a JSON object of
-- the kept members at their request paths (server/aws/_schema.py declares which).
CREATE TABLE api_requests (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    request TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
