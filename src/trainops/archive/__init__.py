"""Tarballs: :func:`pack` a source or model directory, :func:`safe_extract` an untrusted one
within :class:`ArchiveLimits` (:func:`load_extraction` imports the extraction machinery ahead of
the first call, for a process that forks extracting children)."""

from trainops.archive._limits import ArchiveLimits
from trainops.archive._tar import load_extraction, pack, safe_extract

__all__ = ["ArchiveLimits", "load_extraction", "pack", "safe_extract"]
