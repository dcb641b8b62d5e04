"""The profiler sidecar: the system monitor, and the mirror of the host's profiler data.

On every host of a job that profiles (``profiler_config`` given, ``disable_profiler`` false) it

- makes the host's profiler directory: ``FrameworkProfile.local_path`` (default
  ``/opt/ml/output/profiler``) re-rooted in the host's tree;
- writes ``input/config/profilerconfig.json`` and points the script at both through
  ``TRAINOPS_PROFILER_DIR`` and ``TRAINOPS_PROFILER_CONFIG`` (paths as the script sees them:
  under ``/opt/ml`` with ``mount_opt_ml``), for the in-script step and framework profilers;
- runs a :class:`~trainops.monitor.SystemMonitor` every ``system_monitor_interval_millis``
  while the script runs, into ``system/<host>/`` and ``meta/<host>.json``;
- mirrors the whole directory, file by finished file, to the job's profiler prefix
  (``profiler_config.s3_output_path``, default ``<output prefix>/profiler-output``) with a
  :class:`~trainops.agent.reporting._sync.DirectorySync`: a separate uploader process at the
  lowest CPU and I/O priority, never making a torn object visible (chunks are renamed into place
  when complete, and the upload checks the file did not change under it);
- at the end, stops the monitor (its last chunk is written), uploads what is left and reports
  the prefix as the ``profiler`` artifact.

It is best-effort: a monitor that cannot run, or a mirror that fails, is a line in the host log,
never the job's failure.

``profilerconfig.json`` is one JSON object:

=================================  ============================================================
``version``                        1
``job_name``, ``host``, ``hosts``  the job, this host, every host (sorted)
``attempt``                        the job's attempt (1, then 2... on retries)
``instance_type``                  the job's instance type
``job_start``                      Unix seconds this host's training phase was set up: the
                                   start of a time window that gives no ``start_unix_time``
``local_path``                     the profiler directory, as the script sees it (as
                                   ``TRAINOPS_PROFILER_DIR``)
``prefix``                         the job's profiler prefix (a URI)
``s3_output_path``,                the job's ``profiler_config``, as the spec's typed view
``system_monitor_interval_millis``,  writes it (``framework_profile_params`` null when not
``framework_profile_params``,      given; every window resolved to its defaults otherwise)
``disable_profiler``
=================================  ============================================================
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainops.agent.contract._outputs import Artifact
from trainops.agent.contract._tree import OPT_ML, HostTree
from trainops.agent.reporting._sync import DirectorySync
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.monitor import SystemMonitor
from trainops.profiler import CONFIG_ENV, CONFIG_FILE, DIR_ENV, profiler_prefix
from trainops.protocol import ProfilerSpec

__all__ = ["ARTIFACT_NAME", "DEFAULT_LOCAL_PATH", "ProfilerSidecar", "profiler_sidecar"]

#: ``FrameworkProfile.local_path``'s default (the spec's, repeated: the agent does not import
#: the spec models).
DEFAULT_LOCAL_PATH = "/opt/ml/output/profiler"
ARTIFACT_NAME = "profiler"
CONFIG_VERSION = 1


class ProfilerSidecar(Sidecar):
    """System monitor + profiler-data mirror of one host (see the module docstring)."""

    name = "profiler"

    def __init__(self, context: SidecarContext, profiling: ProfilerSpec) -> None:
        self.context = context
        self.profiling = profiling
        params = profiling.framework_profile_params
        self.local_path = params.local_path if params is not None else DEFAULT_LOCAL_PATH
        self.local_dir = context.tree.reroot(self.local_path)
        self.config_file = context.tree.config_dir / CONFIG_FILE
        self.prefix = profiler_prefix(profiling.s3_output_path, context.layout.output_prefix)
        self.monitor: SystemMonitor | None = None
        self.sync: DirectorySync | None = None
        self.started = False

    # The agent's calls -------------------------------------------------------------------

    def prepare(self) -> None:
        self.local_dir.mkdir(parents=True, exist_ok=True)

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        del env
        self.local_dir.mkdir(parents=True, exist_ok=True)
        _write_json(self.config_file, self.config())
        seen = self._seen_tree()
        return {
            DIR_ENV: str(seen.reroot(self.local_path)),
            CONFIG_ENV: str(seen.config_dir / CONFIG_FILE),
        }

    def start(self) -> None:
        self.started = True
        self._start_monitor()
        self._start_mirror()

    def finish(self) -> list[Artifact]:
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        if not self.started:
            return []
        try:
            if self.sync is None:
                self.sync = self._mirror()
            self.sync.final_sync()
        except Exception as exc:  # best-effort: never the job's failure
            self.context.log(f"warning: uploading the profiler data to {self.prefix} failed: {exc}")
        return [Artifact(ARTIFACT_NAME, self.prefix)]

    def abort(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        if self.sync is not None:
            self.sync.stop()

    # Parts -------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The content of ``profilerconfig.json`` (see the module docstring)."""
        assignment = self.context.assignment
        return {
            "version": CONFIG_VERSION,
            "job_name": assignment.job_name,
            "host": assignment.current_host,
            "hosts": sorted(assignment.hosts),
            "attempt": assignment.attempt,
            "instance_type": self.context.job.instance_type,
            "job_start": time.time(),
            "local_path": str(self._seen_tree().reroot(self.local_path)),
            "prefix": self.prefix,
            **self.profiling.to_json(),
        }

    def _seen_tree(self) -> HostTree:
        """The tree as the script sees it: ``/opt/ml`` itself with ``mount_opt_ml``."""
        tree = self.context.tree
        return (
            HostTree(Path(OPT_ML), tree.checkpoint_path)
            if opt_ml_shown(self.context.job.mount_opt_ml)
            else tree
        )

    def _start_monitor(self) -> None:
        assignment = self.context.assignment
        resources = assignment.resources
        try:
            self.monitor = SystemMonitor(
                self.local_dir,
                assignment.current_host,
                interval_ms=self.profiling.system_monitor_interval_millis,
                attempt=assignment.attempt,
                instance_type=self.context.job.instance_type,
                cores=resources.cpus or None,
                gpus=resources.gpus or None,
                log=self.context.log,
            )
            self.monitor.start()
        except Exception as exc:  # best-effort: the job runs on without system metrics
            self.monitor = None
            self.context.log(f"System monitor: could not start ({exc}); no system metrics")

    def _start_mirror(self) -> None:
        try:
            self.sync = self._mirror()
            self.sync.start()
        except Exception as exc:  # best-effort: the data is uploaded at the end instead
            self.sync = None
            self.context.log(
                f"warning: mirroring the profiler data to {self.prefix} could not start ({exc});"
                " it is uploaded when training ends"
            )

    def _mirror(self) -> DirectorySync:
        return DirectorySync(
            self.local_dir,
            self.prefix,
            self.context.store_for(self.prefix),
            propagate_deletes=False,
            interval=self.context.sync_interval,
            on_error=self.context.log,
        )


def profiler_sidecar(context: SidecarContext) -> ProfilerSidecar | None:
    """The profiler sidecar of a job that profiles; None for one that does not."""
    profiling = context.job.profiling
    if profiling is None:
        return None
    return ProfilerSidecar(context, profiling)


def _write_json(path: Path, content: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
