-- The backend's handle of a host's agent: JSON only the backend reads (the local backend's is
-- {"pid": N, "create_time": T}; a Ray backend's names its actor). Rows written before this
-- version keep their pid and process_create_time columns, which the store reads as the local
-- backend's handle; those columns are no longer written.
ALTER TABLE hosts ADD COLUMN handle TEXT;
