-- The machine a host's agent ran on, as its backend names it (shown by describe).
ALTER TABLE hosts ADD COLUMN node TEXT;
