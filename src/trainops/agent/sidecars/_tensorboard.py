"""The TensorBoard sidecar: scalars written as event files and synced while the job runs.

SageMaker's ``TensorBoardOutputConfig``: each host's ``container_local_output_path`` (default
``/opt/ml/output/tensorboard``, re-rooted in the host's tree) is copied to ``s3_output_path``
(default ``<output prefix>/tensorboard``) while training runs. SageMaker copies every host's
directory into the one prefix, telling hosts' files apart by the host name in event file
names; here, with several hosts, each host gets ``<prefix>/<host>/`` (as intermediate outputs
do), because the hosts of a local job share one machine name, and so that TensorBoard shows
each host as a run rather than interleaving files that grow at once in one directory.

The sidecar writes, under ``<local path>/trainops/`` (a run of its own beside the script's
files; ``trainops-attempt-<n>/`` on a retry): every metric the job's metric definitions scrape from the script's output (tag: the
metric's name, step: a counter per metric), and, when the job profiles, the profiler's step
timings and system metrics (see :mod:`trainops.tensorboard._profiler` for the tags). The run is
an HParams session: its start holds the job's hyperparameters (group: the job's name), its end
the host's outcome (success, failure, or unknown when the agent aborts), so TensorBoard's HParams
dashboard lists the job with its hyperparameters beside the metrics' scalars. The
script may write its own event files anywhere under the local path: its directory is in
``TRAINOPS_TENSORBOARD_DIR``, and ``input/config/tensorboardoutputconfig.json`` (``LocalPath``,
``S3OutputPath``, as SageMaker writes it for smdebug; ``TENSORBOARD_CONFIG_FILE_PATH`` names
it) says so too. Every ``5 * sync_interval`` seconds (5 s by default) a low-priority thread
reads new profiler chunks, flushes the writer and syncs the directory; ``finish`` does it once
more. Scraped metric values are queued by the log scanner's thread and encoded by a thread of
their own, so the scanner keeps up with a chatty script while its points are written. Best effort: a failure is logged (once until it changes), never the job's.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.protocol import TensorBoardSpec
from trainops.storage import join_uri
from trainops.tensorboard import (
    DIR_ENV,
    EventSync,
    ProfilerScalars,
    SessionStatus,
    SummaryWriter,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "TensorBoardSidecar",
    "run_name",
    "tensorboard_prefix",
    "tensorboard_sidecar",
]

CONFIG_FILE = "tensorboardoutputconfig.json"
CONFIG_ENV = "TENSORBOARD_CONFIG_FILE_PATH"  # smdebug's override of the config file's path
RUN_NAME = "trainops"  # the sidecar's own run under the local path
PREFIX_NAME = "tensorboard"
DEFAULT_PROFILER_PATH = "/opt/ml/output/profiler"  # FrameworkProfile.local_path's default
#: Scraped points queued for the encoder thread at most; past this the scanner writes them.
MAX_QUEUED_POINTS = 200_000
INTERVALS_PER_PASS = 5  # a pass every 5 sync intervals: 5 s with the agent's default
THREAD_NICE = 10


class TensorBoardSidecar(Sidecar):
    """One host's event writer, profiler reader and sync (see the module docstring)."""

    name = "tensorboard"

    def __init__(self, context: SidecarContext, config: TensorBoardSpec) -> None:
        self.context = context
        self.config = config
        self.local_dir = context.tree.reroot(config.container_local_output_path)
        self.remote = tensorboard_prefix(config, context.layout.output_prefix)
        host_remote = join_uri(self.remote, context.host) if context.layout.multi_host else None
        self.sync = EventSync(
            self.local_dir, host_remote or self.remote, context.store_for(self.remote)
        )
        self.interval = INTERVALS_PER_PASS * context.sync_interval
        self.writer: SummaryWriter | None = None
        self.profiler: ProfilerScalars | None = None
        self._steps: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queued: list[tuple[str, list[float], int, float]] = []  # (tag, values, step, ts)
        self._queued_points = 0
        self._wake = threading.Event()  # points are queued for the encoder
        self._writing = threading.Lock()  # held while queued points are written
        self._encoder: threading.Thread | None = None
        self._last_error = ""

    # The agent's calls ------------------------------------------------------------------

    def prepare(self) -> None:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        config = {"LocalPath": str(self._seen(self.local_dir)), "S3OutputPath": self.remote}
        self.context.tree.write_config(CONFIG_FILE, config)

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        del env
        config_file = self._seen(self.context.tree.config_dir / CONFIG_FILE)
        return {DIR_ENV: str(self._seen(self.local_dir)), CONFIG_ENV: str(config_file)}

    def start(self) -> None:
        self.writer = SummaryWriter(
            self.local_dir / run_name(self.context.assignment.attempt),
            host=self.context.host,
            flush_secs=self.interval,
        )
        self._guard(self._start_session)
        profiler_dir = _profiler_dir(self.context)
        if profiler_dir is not None:
            self.profiler = ProfilerScalars(
                profiler_dir, self.context.host, self.writer.add_scalar, self.context.log
            )
        self.context.add_metric_listener(self._metric)
        self._thread = threading.Thread(target=self._run, name="tensorboard", daemon=True)
        self._thread.start()
        self._encoder = threading.Thread(target=self._encode, name="tb-scalars", daemon=True)
        self._encoder.start()

    def finish(self) -> list[Artifact]:
        self._halt()
        self._guard(self._write_queued)
        if self.profiler is not None:
            self._guard(self.profiler.poll)
        with self._lock:
            writer, self.writer = self.writer, None
        if writer is not None:
            self._guard(lambda: writer.add_session_end(self._outcome()))
            self._guard(writer.close)
            self.sync.vouch(writer.file_writer.whole_files())
        if self.local_dir.is_dir():
            self._guard(lambda: self.sync.sync_once(final=True))
        return [Artifact("tensorboard", self.remote)] if self.sync.uploaded else []

    def abort(self) -> None:
        self._halt()
        with self._lock:
            writer, self.writer = self.writer, None
        if writer is not None:
            with contextlib.suppress(OSError, ValueError):
                writer.add_session_end(SessionStatus.UNKNOWN)
                writer.close()

    # The work ------------------------------------------------------------------------------

    def _start_session(self) -> None:
        """The HParams session's start: the job's hyperparameters."""
        assert self.writer is not None
        hparams = {str(k): _hparam(v) for k, v in self.context.job.hyperparameters.items()}
        self.writer.add_session_start(hparams, self.context.assignment.job_name)

    def _outcome(self) -> SessionStatus:
        """The host's outcome, as the agent marked it in the tree before its sidecars finish."""
        tree = self.context.tree
        if tree.success_file.exists():
            return SessionStatus.SUCCESS
        return SessionStatus.FAILURE if tree.failure_file.exists() else SessionStatus.UNKNOWN

    def _metric(self, name: str, ts: float, values: list[float]) -> None:
        """Scraped metric values (on the log scanner's thread): queued for the encoder, so the
        scanner keeps up with the script; quick, never raising. Past :data:`MAX_QUEUED_POINTS`
        (the encoder is behind) they are written here, slowing the scanner rather than queueing
        without bound (never dropped)."""
        with self._lock:
            if self.writer is None:
                return
            step = self._steps.get(name, 0)
            self._steps[name] = step + len(values)
            self._queued.append((name, values, step, ts))
            self._queued_points += len(values)
            behind = self._queued_points > MAX_QUEUED_POINTS
        self._wake.set()
        if behind:
            self._guard(self._write_queued)

    def _encode(self) -> None:
        """The encoder thread: writes the queued points as they come (at the agent's priority;
        a niced thread holding the GIL would stall the agent's other threads)."""
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            self._guard(self._write_queued)

    def _write_queued(self) -> None:
        # one writer at a time, taking the queue in its order: TensorBoard drops the points of a
        # tag that come after a later step of it (it takes them for a restart's orphans)
        with self._writing:
            with self._lock:
                queued, self._queued, self._queued_points = self._queued, [], 0
                writer = self.writer
            if writer is None:
                return
            for name, values, step, ts in queued:
                try:
                    writer.add_scalars(name, values, step, ts)
                except (OSError, ValueError) as exc:
                    self._report(f"writing metric {name!r}: {exc}")

    def _run(self) -> None:
        if sys.platform == "linux":  # there a thread's niceness is its own, not the agent's
            with contextlib.suppress(OSError):
                tid = threading.get_native_id()
                nice = min(19, os.getpriority(os.PRIO_PROCESS, tid) + THREAD_NICE)
                os.setpriority(os.PRIO_PROCESS, tid, nice)
        while not self._stop.wait(self.interval):
            if self.profiler is not None:
                self._guard(self.profiler.poll)
            writer = self.writer
            if writer is not None:
                self._guard(writer.flush)
                self.sync.vouch(writer.file_writer.whole_files())
            self._guard(self.sync.sync_once)

    def _halt(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in (self._thread, self._encoder):
            if thread is not None:
                thread.join()
        self._thread = self._encoder = None

    def _guard(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # best effort: nothing here may fail the job
            self._report(f"{type(exc).__name__}: {exc}")

    def _report(self, message: str) -> None:
        if message != self._last_error:
            self._last_error = message
            self.context.log(f"TensorBoard: {message} (the job goes on)")

    def _seen(self, path: Path) -> Path:
        """``path`` as the script sees it: under /opt/ml with ``mount_opt_ml``."""
        if not opt_ml_shown(self.context.job.mount_opt_ml):
            return path
        return Path("/opt/ml", path.relative_to(self.context.tree.root))


def run_name(attempt: int) -> str:
    """The sidecar's run: ``trainops``, ``trainops-attempt-<n>`` on a retry (the steps of a
    retry start at 0 again; in the same run TensorBoard would drop the first attempt's points
    as orphaned)."""
    return RUN_NAME if attempt <= 1 else f"{RUN_NAME}-attempt-{attempt}"


def _hparam(value: object) -> bool | int | float | str:
    """A hyperparameter as HParams shows it: a number, a boolean or a string kept; anything else
    (a list, a mapping, null) as its JSON, as the script gets it."""
    if isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True)


def tensorboard_prefix(config: TensorBoardSpec, output_prefix: str) -> str:
    """The job's TensorBoard prefix: ``s3_output_path``, else ``<output prefix>/tensorboard``."""
    if config.s3_output_path:
        return config.s3_output_path.rstrip("/")
    return join_uri(output_prefix, PREFIX_NAME)


def _profiler_dir(context: SidecarContext) -> Path | None:
    """The host's local profiler directory, when the job profiles."""
    profiling = context.job.profiling
    if profiling is None:
        return None
    params = profiling.framework_profile_params
    return context.tree.reroot(params.local_path if params else DEFAULT_PROFILER_PATH)


def tensorboard_sidecar(context: SidecarContext) -> TensorBoardSidecar | None:
    config = context.job.tensorboard_output_config
    return None if config is None else TensorBoardSidecar(context, config)
