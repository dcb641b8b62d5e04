"""The sync sidecars: checkpoints (restored at start, mirrored while training, deletions
propagated) and intermediate outputs (mirrored while training, never deleted remotely).

Both run a :class:`~trainops.agent.reporting._sync.DirectorySync`; its module says how files are
found finished, uploaded at the lowest priority and never shown torn.
"""

from __future__ import annotations

from pathlib import Path

from trainops.agent.contract._outputs import Artifact
from trainops.agent.reporting._sync import DirectorySync
from trainops.agent.sidecars._base import Sidecar, SidecarContext

__all__ = ["CheckpointSync", "IntermediateSync", "checkpoint_sync", "intermediate_sync"]


class _DirectorySidecar(Sidecar):
    def __init__(
        self,
        context: SidecarContext,
        local: Path,
        remote: str,
        *,
        propagate_deletes: bool,
        eager: bool = False,
    ) -> None:
        self.context = context
        self.remote = remote
        self.sync = DirectorySync(
            local,
            remote,
            context.store_for(remote),
            propagate_deletes=propagate_deletes,
            interval=context.sync_interval,
            on_error=context.log,
            eager=eager,
        )

    def start(self) -> None:
        self.sync.start()

    def finish(self) -> list[Artifact]:
        self.sync.final_sync()
        return []

    def abort(self) -> None:
        self.sync.stop()


class CheckpointSync(_DirectorySidecar):
    """``checkpoint.local_path`` <-> ``checkpoint.uri``, as SageMaker's checkpoint config."""

    name = "checkpoints"

    def prepare(self) -> None:
        restored = self.sync.restore()
        if restored:
            self.context.log(f"Restored {restored} checkpoint file(s) from {self.remote}")

    def finish(self) -> list[Artifact]:
        super().finish()
        return [Artifact("checkpoint", self.remote)]


class IntermediateSync(_DirectorySidecar):
    """``output/intermediate/`` -> the job's ``output/intermediate/`` prefix (per host)."""

    name = "intermediate"


def checkpoint_sync(context: SidecarContext) -> CheckpointSync | None:
    uri = context.job.checkpoint_uri
    if uri is None:
        return None
    # A job that asks for checkpoint sync writes checkpoints: its uploader starts before the
    # script does, so that its start-up never lands in the middle of a training step.
    return CheckpointSync(
        context, context.tree.checkpoint_dir, uri, propagate_deletes=True, eager=True
    )


def intermediate_sync(context: SidecarContext) -> IntermediateSync:
    return IntermediateSync(
        context,
        context.tree.intermediate_dir,
        context.layout.intermediate_prefix,
        propagate_deletes=False,
    )
