-- The rank that wrote a log line, where its host ran several (NULL otherwise).
ALTER TABLE logs ADD COLUMN rank INTEGER;
