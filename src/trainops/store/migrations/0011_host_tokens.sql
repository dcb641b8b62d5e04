-- Agent tokens are scoped to one host of one attempt: each host keeps the SHA-256 of its own
-- token, cleared once the host has ended (its exit stored, or declared lost) or its job has.
-- Hosts still running when this runs were started with the job's one token: they keep its hash,
-- so the agents an older control plane started go on reporting. The job's column is no longer
-- read (SQLite before 3.35 cannot drop it): it is emptied.
ALTER TABLE hosts ADD COLUMN token_hash TEXT;

UPDATE hosts
SET token_hash = (
    SELECT jobs.agent_token_hash FROM jobs
    WHERE jobs.name = hosts.job AND jobs.attempt = hosts.attempt
        AND jobs.status IN ('InProgress', 'Stopping')
)
WHERE state != 'Exited';

UPDATE jobs SET agent_token_hash = NULL;
