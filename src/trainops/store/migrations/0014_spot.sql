-- Managed spot training. A spot job is interrupted (its hosts stopped with a notice), waits for
-- capacity in Pending, then runs again as a new attempt; these columns carry that across a
-- control-plane restart. ``interruptions``: how many so far (from any source); ``spot_notice``
-- and ``spot_gap``: the notice and capacity gap of the interruption under way; ``capacity_wait_until``:
-- when its gap ends (set once every host is down, so a restarted control plane resumes the wait);
-- ``attempt_training_start``: when the current attempt entered Training; ``billable_accrued``:
-- the running seconds of the attempts that were interrupted; ``chaos_done``: how many of the
-- job's chaos schedule's interruptions have been played.
ALTER TABLE jobs ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN spot_notice REAL;
ALTER TABLE jobs ADD COLUMN spot_gap REAL;
ALTER TABLE jobs ADD COLUMN capacity_wait_until REAL;
ALTER TABLE jobs ADD COLUMN attempt_training_start REAL;
ALTER TABLE jobs ADD COLUMN billable_accrued REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN chaos_done INTEGER NOT NULL DEFAULT 0;
