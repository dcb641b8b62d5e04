"""Object-storage keys of a job's own: the seam, and the grant a job's record implies.

Where the object store can issue keys (the served SeaweedFS of ``trainops server --s3``), the
control plane gives each job's agents a key scoped to the job's own prefixes instead of the
server's: issued when an attempt is launched (a new attempt's key replaces the last one's),
revoked when the job ends, before its final status is recorded, and, when a control plane
starts, for every job that holds one but no longer runs. Without such a store (``None``) agents
reach object storage with the credentials the server is configured with, as before.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Protocol

from trainops._errors import TrainopsError
from trainops.storage._grants import JobGrant

if TYPE_CHECKING:
    from trainops.store import JobRecord

__all__ = ["JobCredentials", "job_grant", "manifest_prefixes", "revoke_quietly"]

_log = logging.getLogger(__name__)
# A ManifestFile starts with {"prefix": "s3://bucket/path/"}: its head is enough to find it.
_MANIFEST_HEAD_BYTES = 64 * 1024
_MANIFEST_PREFIX = re.compile(rb'\A\s*\[\s*\{\s*"prefix"\s*:\s*("(?:[^"\\]|\\.)*")\s*\}')


class JobCredentials(Protocol):
    """Issues and revokes per-job object-storage keys (``S3Server.jobs`` is one)."""

    def issue(self, job: str, grant: JobGrant) -> dict[str, str]:
        """The variables that give ``job``'s agents a new key scoped to ``grant``, usable when
        this returns (its earlier key, if any, stops working). Raises
        :class:`~trainops.TrainopsError` or ``OSError``."""
        ...

    def revoke(self, job: str) -> None:
        """End ``job``'s key: refused by the store when this returns. No-op without one."""
        ...

    def retain(self, jobs: Collection[str]) -> None:
        """Revoke the key of every job not in ``jobs``."""
        ...


def job_grant(job: JobRecord, more_reads: tuple[str, ...] = ()) -> JobGrant:
    """What ``job`` may reach: its code, channels and ``more_reads`` (its ManifestFiles'
    prefixes: :func:`manifest_prefixes`) to read; its output prefix and the other folders it
    writes (checkpoints, profiler, debugger and TensorBoard output) to write."""
    spec = job.spec
    read = [job.code_uri, *(channel.uri for channel in spec.inputs if channel.uri is not None)]
    read += more_reads
    write = [job.output_prefix]
    if spec.checkpoint_uri is not None:
        write.append(spec.checkpoint_uri)
    for config in (spec.profiler_config, spec.tensorboard_output_config):
        if config is not None and config.s3_output_path:
            write.append(config.s3_output_path)
    if spec.debugger_hook_config is not None:
        write.append(spec.debugger_hook_config.output_prefix(job.output_prefix, job.name))
    return JobGrant(read=tuple(dict.fromkeys(read)), write=tuple(dict.fromkeys(write)))


def manifest_prefixes(job: JobRecord, head: Callable[[str, int], bytes]) -> tuple[str, ...]:
    """The prefixes ``job``'s ManifestFile channels list objects under, read from the head of
    each manifest (``head(uri, size)``: its first bytes). A manifest that cannot be read or
    parsed adds nothing: the channel then fails in the job, saying why."""
    found = []
    for channel in job.spec.inputs:
        if channel.s3_data_type != "ManifestFile" or channel.uri is None:
            continue
        try:
            match = _MANIFEST_PREFIX.match(head(channel.uri, _MANIFEST_HEAD_BYTES))
            prefix = json.loads(match.group(1)) if match else None
        except (TrainopsError, OSError, ValueError):
            prefix = None
        if isinstance(prefix, str) and prefix.endswith("/"):
            found.append(prefix)
    return tuple(found)


def revoke_quietly(credentials: JobCredentials | None, job: str) -> None:
    """Revoke ``job``'s key; a store that fails to is logged (its end must not wait on it)."""
    if credentials is None:
        return
    try:
        credentials.revoke(job)
    except Exception as exc:  # (any store's failure: the job ends all the same)
        _log.error("could not revoke the object-storage key of job %s: %s", job, exc)
