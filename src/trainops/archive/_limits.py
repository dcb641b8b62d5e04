"""How much an archive may expand to: members, bytes, ratio to its own size, path lengths.

The defaults fit source directories and models comfortably and refuse the classic bombs (a few
megabytes of gzip that expand to gigabytes, or a hundred thousand tiny files). They are settings
(``archive:`` in ``config.yaml`` or ``TRAINOPS_ARCHIVE_*`` variables; docs/storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from trainops._settings_source import SettingsSource

__all__ = ["ArchiveLimits"]

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Caps applied while an archive is checked and extracted."""

    max_members: int = 20_000
    """Entries (files, directories and links) in one archive."""
    max_total_bytes: int = 4 * GIB
    """Bytes of all extracted files together (hard links count as copies)."""
    max_member_bytes: int = 2 * GIB
    """Bytes of one extracted file."""
    max_ratio: int = 200
    """Extracted bytes per byte of archive, beyond ``ratio_floor_bytes``."""
    ratio_floor_bytes: int = 64 * MIB
    """Any archive may expand to this much, whatever its ratio."""
    max_path_length: int = 1024
    """Characters in an entry's name (``PATH_MAX`` is 4096; components at most 255 bytes)."""

    @classmethod
    def read(cls, source: SettingsSource) -> ArchiveLimits:
        """``archive:`` in config.yaml; each ``TRAINOPS_ARCHIVE_<KEY>`` variable wins."""
        archive = source.within("archive")
        default = cls()
        values = {}
        for limit in fields(cls):
            found = archive.whole_number(limit.name, f"TRAINOPS_ARCHIVE_{limit.name.upper()}")
            values[limit.name] = getattr(default, limit.name) if found is None else found
        return cls(**values)

    def expansion_cap(self, archive_bytes: int) -> int:
        """The most bytes an archive of ``archive_bytes`` may extract to."""
        by_ratio = max(self.ratio_floor_bytes, self.max_ratio * archive_bytes)
        return min(self.max_total_bytes, by_ratio)
