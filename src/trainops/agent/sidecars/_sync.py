"""The sync sidecars: checkpoints (restored at start, mirrored while training, deletions
propagated) and intermediate outputs (mirrored while training, never deleted remotely).

Both run a :class:`~trainops.agent.reporting._sync.DirectorySync`; its module says how files are
found finished, uploaded at the lowest priority and never shown torn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.contract._outputs import Artifact
from trainops.agent.reporting._sync import DirectorySync, RestoreReport, SyncedFile
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.protocol import CheckpointKind, CheckpointRecord

__all__ = ["CheckpointSync", "IntermediateSync", "checkpoint_sync", "intermediate_sync"]

# ``synced`` records of files uploaded while training, per host and attempt (one per file: a
# script checkpointing every second for a day stops being recorded after this many).
MAX_BACKGROUND_RECORDS = 1000


class _DirectorySidecar(Sidecar):
    def __init__(
        self,
        context: SidecarContext,
        local: Path,
        remote: str,
        *,
        propagate_deletes: bool,
        eager: bool = False,
        manifest: tuple[str, int] | None = None,
        on_error: Callable[[str], None] | None = None,
        on_recovered: Callable[[str], None] | None = None,
        on_synced: Callable[[SyncedFile], None] | None = None,
    ) -> None:
        self.context = context
        self.remote = remote
        self.sync = DirectorySync(
            local,
            remote,
            context.store_for(remote),
            propagate_deletes=propagate_deletes,
            interval=context.sync_interval,
            on_error=on_error or context.log,
            on_recovered=on_recovered,
            on_synced=on_synced,
            eager=eager,
            manifest=manifest,
        )

    def start(self) -> None:
        self.sync.start()

    def finish(self) -> list[Artifact]:
        self.sync.final_sync()
        return []

    def script_killed(self, signum: int, when: float) -> None:
        self.sync.note_death(signum, when)

    def abort(self) -> None:
        self.sync.stop()


class CheckpointSync(_DirectorySidecar):
    """``checkpoint.local_path`` <-> ``checkpoint.uri``, as SageMaker's checkpoint config.

    Every restore, last sync and failed or stalled upload is a ``checkpoint`` event (a
    :class:`~trainops.store.CheckpointRecord`) and an agent line in the job's log.
    """

    name = "checkpoints"

    def __init__(self, context: SidecarContext, local: Path, remote: str) -> None:
        super().__init__(
            context,
            local,
            remote,
            propagate_deletes=True,
            eager=True,
            manifest=(context.host, context.assignment.attempt),
            on_error=self._failed,
            on_recovered=context.log,
            on_synced=self._synced,
        )
        self._background_records = 0

    def prepare(self) -> None:
        started = time.monotonic()
        restored = self.sync.restore()
        report = self.sync.last_restore
        if report is None:
            return
        for line in report.problems:
            self.context.log(f"WARNING: checkpoint restore: {line}")
        for rel, why in sorted(report.skipped.items()):
            self.context.log(f"Not restoring checkpoint file {rel}: {why}")
        if not restored and not report.skipped:
            self.context.log(f"No checkpoint to restore from {self.remote}: starting afresh")
            return
        reason = _which(report, self.remote)
        self.context.log(reason)
        self._record(
            "restored",
            files=report.files,
            size=report.bytes,
            newest=None if report.newest is None else report.newest[1].entry.mtime,
            upload=time.monotonic() - started,
            reason=reason,
        )

    def before_kill(self) -> None:
        for rel in self.sync.note_writers():
            self.context.log(
                f"Checkpoint file {rel} was still being written when the processes were "
                "killed: it is not uploaded (its last finished version, if any, stays)"
            )

    def finish(self) -> list[Artifact]:
        result = self.sync.final_sync(raise_failures=False)
        entries = self.sync.entries
        newest = max(entries.items(), key=lambda item: item[1].mtime, default=None)
        write = None
        if newest is not None and newest[0] in self.sync.first_seen:
            write = max(0.0, newest[1].mtime - self.sync.first_seen[newest[0]])
        for rel, name in sorted(result.torn.items()):
            self.context.log(
                f"Checkpoint file {rel} was written in place just before the script died of"
                f" {name}, which may have left it half-written: it is not uploaded (its last"
                " finished version, if any, stays)"
            )
        if result.left:
            left = "; ".join(f"{rel}: {why}" for rel, why in sorted(result.left.items()))
            reason = f"the last checkpoint sync left {len(result.left)} file(s) behind: {left}"
            self.context.log(f"WARNING: {reason}")
            sizes = [_size(self.sync.local_dir / rel) for rel in result.left]
            self._record("sync_incomplete", files=len(sizes), size=sum(sizes), reason=reason,
                         newest=None if newest is None else newest[1].mtime, write=write,
                         upload=result.seconds)  # fmt: skip
            failed = [rel for rel, why in result.left.items() if why.startswith("its upload")]
            if failed and not self.context.interrupted():
                raise StorageError(f"checkpoint sync to {self.remote}: {left}")
        else:
            size = sum(e.size for e in entries.values())
            self.context.log(
                f"Checkpoints synced to {self.remote}: {len(entries)} file(s), "
                f"{size / 1e6:.1f} MB ({len(result.uploaded)} uploaded now, in "
                f"{result.seconds:.1f} s)"
            )
            self._record("synced", files=len(entries), size=size, upload=result.seconds,
                         newest=None if newest is None else newest[1].mtime, write=write)  # fmt: skip
        return [Artifact("checkpoint", self.remote)]

    def _synced(self, synced: SyncedFile) -> None:
        """A checkpoint file made visible while training: a ``synced`` record, so that the cost
        advice can measure how long the script takes to write one and how often it does."""
        if self._background_records >= MAX_BACKGROUND_RECORDS:
            return  # the last sync is still recorded
        self._background_records += 1
        entries = self.sync.entries
        write = None
        if synced.entry is not None and synced.first_seen is not None:
            write = max(0.0, synced.entry.mtime - synced.first_seen)
        self._record(
            "synced",
            files=len(entries),
            size=sum(e.size for e in entries.values()),
            newest=None if synced.entry is None else synced.entry.mtime,
            write=write,
            upload=synced.upload_seconds,
            reason=f"{synced.rel} uploaded while training",
        )

    def _failed(self, message: str) -> None:
        self.context.log(f"WARNING: checkpoint sync failing: {message}")
        self._record("sync_failed", files=0, size=0, reason=message)

    def _record(
        self,
        kind: CheckpointKind,
        *,
        files: int,
        size: int,
        newest: float | None = None,
        write: float | None = None,
        upload: float | None = None,
        reason: str | None = None,
    ) -> None:
        record = CheckpointRecord(
            job=self.context.assignment.job_name,
            attempt=self.context.assignment.attempt,
            host=self.context.host,
            kind=kind,
            at=time.time(),
            files=files,
            bytes=size,
            newest_write=newest,
            write_seconds=write,
            upload_seconds=upload,
            reason=reason,
        )
        self.context.report("checkpoint", record.event_data())


def _which(report: RestoreReport, remote: str) -> str:
    """The restore's line: what it restored, from where, and how old its newest file is."""
    what = f"Restored {report.files} checkpoint file(s), {report.bytes / 1e6:.1f} MB, from {remote}"
    if report.newest is None:
        return f"{what}; no manifest lists them, so their age is unknown"
    rel, listing = report.newest
    age = max(0.0, time.time() - listing.entry.mtime)
    return (
        f"{what}; the newest, {rel}, was written {age:.0f} s ago by {listing.host} "
        f"(attempt {listing.attempt})"
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class IntermediateSync(_DirectorySidecar):
    """``output/intermediate/`` -> the job's ``output/intermediate/`` prefix (per host)."""

    name = "intermediate"


def checkpoint_sync(context: SidecarContext) -> CheckpointSync | None:
    uri = context.job.checkpoint_uri
    if uri is None:
        return None
    # A job that asks for checkpoint sync writes checkpoints: its uploader starts before the
    # script does, so that its start-up never lands in the middle of a training step.
    return CheckpointSync(context, context.tree.checkpoint_dir, uri)


def intermediate_sync(context: SidecarContext) -> IntermediateSync:
    return IntermediateSync(
        context,
        context.tree.intermediate_dir,
        context.layout.intermediate_prefix,
        propagate_deletes=False,
    )
