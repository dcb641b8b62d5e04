"""The host agent's settings: what a channel does where the machine lacks what it needs, and how
often the agent reports.

``fastfile_fallback`` in config.yaml or ``TRAINOPS_FASTFILE_FALLBACK``: a FastFile channel on a
machine without FUSE (or rclone) is downloaded as in File mode, with a warning in the job's
log, instead of failing the job (docs/data-fastfile.md). ``heartbeat_interval_ms`` or
``TRAINOPS_HEARTBEAT_INTERVAL_MS``: the agent's report interval while it has nothing new to send
(docs/configuration.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["MAX_HEARTBEAT_INTERVAL_MS", "MIN_HEARTBEAT_INTERVAL_MS", "AgentSettings"]

MIN_HEARTBEAT_INTERVAL_MS = 50
# Twice this (the interval after a quiet spell) stays within the 2 s the control plane's smallest
# heartbeat timeout allows for (``trainops.control``'s MIN_HEARTBEAT_TIMEOUT).
MAX_HEARTBEAT_INTERVAL_MS = 1000


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What a host agent reads besides the job's own spec."""

    fastfile_fallback: bool = False
    """Download a FastFile channel as in File mode where it cannot be mounted."""
    heartbeat_interval_ms: int = 500
    """How often the agent reports while it has nothing new to send (twice as long after 5 s of
    quiet). A command for its host (a spot interruption's notice, a relayed spawn) reaches it
    with its next report: a shorter interval delivers it sooner, for more requests to the
    control plane."""

    @classmethod
    def read(cls, source: SettingsSource) -> AgentSettings:
        """``fastfile_fallback`` (true/false, or 1/0) and ``heartbeat_interval_ms`` (50-1000);
        their variables win."""
        fallback = source.flag("fastfile_fallback", "TRAINOPS_FASTFILE_FALLBACK")
        names = ("heartbeat_interval_ms", "TRAINOPS_HEARTBEAT_INTERVAL_MS")
        interval = source.whole_number(
            *names, minimum=MIN_HEARTBEAT_INTERVAL_MS, label=names[0], unit=" ms"
        )
        if interval is not None and interval > MAX_HEARTBEAT_INTERVAL_MS:
            raise source.error(
                *names,
                problem=f"{names[0]} must be at most {MAX_HEARTBEAT_INTERVAL_MS} ms (a host "
                f"silent for a few seconds is taken for lost), got {interval} ms",
            )
        default = cls()
        return cls(
            fastfile_fallback=bool(fallback),
            heartbeat_interval_ms=default.heartbeat_interval_ms if interval is None else interval,
        )
