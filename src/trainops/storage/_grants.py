"""What one job may reach in object storage: :class:`JobGrant`.

The control plane derives a job's grant from its record (``control/_credentials.py``); a store
that issues per-job keys (the served SeaweedFS: ``_seaweed_identities``) scopes them to it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JobGrant"]


@dataclass(frozen=True, slots=True)
class JobGrant:
    """``read``: URIs a job may read and list (key prefixes, as S3 lists them); ``write``:
    folders it may write, read back, list and delete under. A store ignores other schemes."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
