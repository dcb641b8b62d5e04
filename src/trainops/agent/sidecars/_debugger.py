"""The debugger sidecar: the hook's configuration for the script, and its tensors' sync.

SageMaker's ``DebugHookConfig``: each host's ``input/config/debughookconfig.json`` holds
``LocalPath`` (``container_local_output_path``, default ``/opt/ml/output/tensors``, as the script
sees it), ``S3OutputPath`` (where the tensors go: ``<s3_output_path>/<job>/debug-output``, by
default ``<output_path>/<job>/debug-output``), ``HookParameters`` and
``CollectionConfigurations``; smdebug's ``Hook.create_from_json_file()`` and trainops' own hook
read it. ``SMDEBUG_CONFIG_FILE_PATH`` names the file (SageMaker leaves it unset, the default
path being where it writes the file; trainops sets it so that a script whose tree is not shown
at /opt/ml finds it too).

While the script runs, a low-priority thread (and its uploading threads, as low) copies the
local directory to the prefix every ``sync_interval`` seconds (at most
:data:`PASS_INTERVAL_S`), start to start: a pass that took longer is followed by the next at
once (:class:`~trainops.agent.reporting._debug_sync.DebugSync`: an index file only after its event
file, several uploads at once, bounded, no links followed); ``finish`` makes a final pass and
then writes ``training_job_end.ts`` (a retried attempt removes the earlier attempt's first).
With several hosts, each host writes the marker when it ends, so a reader may see it before
the last host's final pass: SageMaker, whose hooks write it, has the same race. All hosts share the prefix, as on SageMaker (workers name
their files apart). Best effort: a failure is logged (once until it changes), never the job's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.agent.contract._outputs import Artifact
from trainops.agent.reporting._debug_sync import DebugSync
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.protocol import DebugHookSpec

__all__ = ["CONFIG_ENV", "CONFIG_FILE", "DebuggerSidecar", "debugger_sidecar", "hook_config_json"]

CONFIG_FILE = "debughookconfig.json"
CONFIG_ENV = "SMDEBUG_CONFIG_FILE_PATH"
THREAD_NICE = 10
#: Seconds between passes at most: a live rule's verdict waits on this pass and then on the
#: rules service's tick; a pass finding nothing new costs well under a millisecond.
PASS_INTERVAL_S = 0.5
_PATH_PARAMETERS = ("tensorboard_dir",)  # hook parameters naming a directory under /opt/ml


class DebuggerSidecar(Sidecar):
    """One host's hook configuration file and tensors sync (see the module docstring)."""

    name = "debugger"

    def __init__(self, context: SidecarContext, config: DebugHookSpec) -> None:
        self.context = context
        self.config = config
        self.local_dir = context.tree.reroot(config.container_local_output_path)
        self.remote = config.output_prefix(
            context.layout.output_prefix, context.assignment.job_name
        )
        store = context.store_for(self.remote)
        self.sync = DebugSync(
            self.local_dir, self.remote, store, self._report, thread_setup=_lower_priority
        )
        self.interval = min(context.sync_interval, PASS_INTERVAL_S)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""

    # The agent's calls ------------------------------------------------------------------

    def prepare(self) -> None:
        if self.context.assignment.attempt > 1:  # a retry: readers must wait for this one too
            self._guard(self.sync.unmark_end)
        self.local_dir.mkdir(parents=True, exist_ok=True)
        content = hook_config_json(self.config, str(self._seen(self.local_dir)), self.remote)
        parameters = content["HookParameters"]
        for key in _PATH_PARAMETERS:
            if key in parameters:
                parameters[key] = str(self._seen(self.context.tree.reroot(parameters[key])))
        self.context.tree.write_config(CONFIG_FILE, content)

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        del env
        return {CONFIG_ENV: str(self._seen(self.context.tree.config_dir / CONFIG_FILE))}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="debugger-sync", daemon=True)
        self._thread.start()

    def finish(self) -> list[Artifact]:
        self._halt()
        if self.local_dir.is_dir():
            self._guard(lambda: self.sync.sync_once(final=True))
        self._guard(self.sync.mark_end)
        return [Artifact("debug-output", self.remote)] if self.sync.sent else []

    def abort(self) -> None:
        self._halt()

    # The work ------------------------------------------------------------------------------

    def _run(self) -> None:
        """A pass every ``interval`` seconds, start to start: a pass that took longer (the
        script writes faster than one pass a second uploads) is followed by the next at once,
        one that failed by a whole interval's wait."""
        _lower_priority()
        next_at = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            started = time.monotonic()
            failed = self._guard(self.sync.sync_once)
            next_at = (time.monotonic() if failed else started) + self.interval

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _guard(self, action: Callable[[], object]) -> bool:
        """Run ``action``; True if it failed (reported, never raised)."""
        try:
            action()
        except Exception as exc:  # best effort: nothing here may fail the job
            self._report(f"{type(exc).__name__}: {exc}")
            return True
        return False

    def _report(self, message: str) -> None:
        if message != self._last_error:
            self._last_error = message
            self.context.log(f"Debugger: {message} (the job goes on)")

    def _seen(self, path: Path) -> Path:
        """``path`` as the script sees it: under /opt/ml with ``mount_opt_ml``."""
        if not opt_ml_shown(self.context.job.mount_opt_ml):
            return path
        return Path("/opt/ml", path.relative_to(self.context.tree.root))


def _lower_priority() -> None:
    """Lower the calling thread's priority by :data:`THREAD_NICE` (on Linux a thread's
    niceness is its own, not the agent's): the sync yields to the script."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            tid = threading.get_native_id()
            nice = min(19, os.getpriority(os.PRIO_PROCESS, tid) + THREAD_NICE)
            os.setpriority(os.PRIO_PROCESS, tid, nice)


def hook_config_json(config: DebugHookSpec, local_path: str, s3_output_path: str) -> dict[str, Any]:
    """``debughookconfig.json``'s content (SageMaker's ``DebugHookConfig`` shape)."""
    return config.api_shape(local_path, s3_output_path)


def debugger_sidecar(context: SidecarContext) -> DebuggerSidecar | None:
    config = context.job.debugger_hook_config
    return None if config is None else DebuggerSidecar(context, config)
