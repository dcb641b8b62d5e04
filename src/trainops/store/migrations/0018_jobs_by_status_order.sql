-- The jobs page's status filter in each of its orders, read from an index and stopped at the
-- page's size rather than reading every job of that status and sorting them: a status with
-- the creation time (``order=created``) and with the name (``order=name``); ``order=status``
-- already has ``jobs_by_status (status, id)``. The rowid (``id``, the ties' order) ends each.
CREATE INDEX jobs_by_status_creation ON jobs (status, creation_time);
CREATE INDEX jobs_by_status_name ON jobs (status, name);
