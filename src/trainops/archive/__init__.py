"""Tarballs: :func:`pack` a source or model directory, :func:`safe_extract` an untrusted one
within :class:`ArchiveLimits`."""

from trainops.archive._limits import ArchiveLimits
from trainops.archive._tar import pack, safe_extract

__all__ = ["ArchiveLimits", "pack", "safe_extract"]
