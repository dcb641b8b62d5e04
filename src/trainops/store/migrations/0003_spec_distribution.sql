-- Job specs gain a `distribution` section. Specs stored before it ran one plain process per
-- host: that is what they get, so every stored spec stays a complete JobSpec dump.
UPDATE jobs
SET spec = json_set(
    spec,
    '$.distribution',
    json('{"torch_distributed": {"enabled": false}, "pytorchddp": {"enabled": false}, "mpi": {"enabled": false, "processes_per_host": null, "custom_mpi_options": ""}, "parameter_server": {"enabled": false}, "multi_worker_mirrored_strategy": {"enabled": false}, "smdistributed": {"dataparallel": {"enabled": false, "custom_mpi_options": ""}, "modelparallel": {"enabled": false, "parameters": {}}}, "processes_per_host": 1, "oversubscribe": false}')
)
WHERE json_extract(spec, '$.distribution') IS NULL;
