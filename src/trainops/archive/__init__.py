"""Tarballs: :func:`pack` a source or model directory, :func:`safe_extract` an untrusted one."""

from trainops.archive._tar import pack, safe_extract

__all__ = ["pack", "safe_extract"]
