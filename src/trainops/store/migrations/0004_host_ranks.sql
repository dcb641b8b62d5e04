-- A host may run several ranks (distribution.processes_per_host): how each of them exited.
ALTER TABLE hosts ADD COLUMN ranks TEXT NOT NULL DEFAULT '[]';
