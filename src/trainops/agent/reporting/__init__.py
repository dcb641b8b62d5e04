"""Reporting from a host: what the control plane and object storage hear of a running job.

- ``_client``: the agent API client;
- ``_reporter``: the :class:`Reporter` seam, its HTTP implementation and the event journal;
- ``_hostlog``: the host's log, every line to a file and to the reporter;
- ``_metrics`` and ``_scrape_worker``: the spec's metric regexes, run in a worker process
  (``_worker_fork``: the job's first worker, forked while the agent has one thread);
- ``_sync`` and ``_watch``: a local directory and an object-storage prefix kept in step;
- ``_priority``: the agent's own work kept behind the training script's.

Reporting imports neither supervision nor the SageMaker contract: it is the bottom of the agent.
The modules are private; the agent's public names are exported by :mod:`trainops.agent`. This
package imports nothing itself, so that importing one module costs only that module.
"""
