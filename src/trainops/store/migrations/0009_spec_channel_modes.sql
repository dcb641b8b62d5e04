-- Channels gain Pipe and FastFile modes, compression, record wrapping, manifests and file-system
-- sources; jobs gain mount_opt_ml. Specs stored before had File-mode channels of objects under a
-- uri, and no /opt/ml mount: that is what they get, so every stored spec stays a complete
-- JobSpec dump (keys a channel has are kept).
UPDATE jobs
SET spec = json_set(
    spec,
    '$.inputs',
    (
        SELECT json_group_object(
            channel.key,
            json_insert(
                channel.value,
                '$.file_system', json('null'),
                '$.compression', 'None',
                '$.record_wrapping', 'None',
                '$.s3_data_type', 'S3Prefix',
                '$.attribute_names', json('[]')
            )
        )
        FROM json_each(jobs.spec, '$.inputs') AS channel
    )
)
WHERE json_type(spec, '$.inputs') = 'object'
  AND EXISTS (
      SELECT 1 FROM json_each(jobs.spec, '$.inputs') AS channel
      WHERE json_type(channel.value, '$.s3_data_type') IS NULL
  );

UPDATE jobs
SET spec = json_set(spec, '$.mount_opt_ml', json('false'))
WHERE json_type(spec, '$.mount_opt_ml') IS NULL;
