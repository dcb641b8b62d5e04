"""Supervision on a host: the processes a job starts, contained, watched, stopped and reaped.

- ``_hostns``: the host's namespaces (host names that resolve, the mounts, /opt/ml);
- ``_process``: one process in its own session, its output captured, always reaped;
- ``_pipes``: stdout and stderr read in the order they were written;
- ``_group``: a host's ranks started together and ended together;
- ``_rank_report``: what a launcher that starts ranks itself (torchrun, mpirun) says of them;
- ``_reaper``: every process a job's command started, so that none outlives the job;
- ``_stop``: stop requests (a ``stop`` command or SIGTERM) delivered to what runs;
- ``_remote``: the agent's side of the remote shell between a job's hosts;
- ``_actions``: a rule's command action, run as the job's own processes run;
- ``_space``: a full disk under the host's tree, recognised and explained;
- ``_standby``: an agent that has imported everything, forking one agent per launch;
- ``_nodump``: keeping an agent's memory to itself.

Supervision writes every line it captures to the reporting side (:mod:`trainops.agent.reporting`)
and never imports the SageMaker contract (:mod:`trainops.agent.contract`). The modules are
private; the agent's public names are exported by :mod:`trainops.agent`. This package imports
nothing itself, so that importing one module costs only that module.
"""
