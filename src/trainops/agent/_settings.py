"""The host agent's settings: what a channel does where the machine lacks what it needs.

``fastfile_fallback`` in config.yaml or ``TRAINOPS_FASTFILE_FALLBACK``: a FastFile channel on a
machine without FUSE (or rclone) is downloaded as in File mode, with a warning in the job's
log, instead of failing the job (docs/data-fastfile.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["AgentSettings"]


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What a host agent reads besides the job's own spec."""

    fastfile_fallback: bool = False
    """Download a FastFile channel as in File mode where it cannot be mounted."""

    @classmethod
    def read(cls, source: SettingsSource) -> AgentSettings:
        """``fastfile_fallback`` (true/false, or 1/0); its variable wins."""
        fallback = source.flag("fastfile_fallback", "TRAINOPS_FASTFILE_FALLBACK")
        return cls(fastfile_fallback=bool(fallback))
