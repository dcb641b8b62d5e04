"""The control plane's settings: when a silent host is lost, how many ended jobs keep trees.

Top-level keys of config.yaml (``heartbeat_timeout``, ``keep_job_trees``) or their
``TRAINOPS_*`` variables; docs/configuration.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["MIN_HEARTBEAT_TIMEOUT", "ControlSettings"]

# An agent reports at least every second (0.5 s while it has news) and retries a failed report
# within 2 s.
MIN_HEARTBEAT_TIMEOUT = 5


@dataclass(frozen=True, slots=True)
class ControlSettings:
    """What the controller's monitor and retention read."""

    heartbeat_timeout: int = 60
    """A host whose agent sent no report for this many seconds is lost, even where the backend
    still sees its agent."""
    keep_job_trees: int = 20
    """Host trees (``jobs/<job>/``) of ended jobs beyond the newest this many are deleted."""

    @classmethod
    def read(cls, source: SettingsSource) -> ControlSettings:
        """``heartbeat_timeout`` and ``keep_job_trees``; their variables win."""
        default = cls()
        timeout = source.whole_number("heartbeat_timeout", "TRAINOPS_HEARTBEAT_TIMEOUT")
        if timeout is not None and timeout < MIN_HEARTBEAT_TIMEOUT:
            raise source.error(
                "heartbeat_timeout",
                "TRAINOPS_HEARTBEAT_TIMEOUT",
                problem=f"heartbeat_timeout must be at least {MIN_HEARTBEAT_TIMEOUT} seconds "
                f"(an agent retries a failed report within 2 s), got {timeout}",
            )
        keep = source.whole_number("keep_job_trees", "TRAINOPS_KEEP_JOB_TREES")
        return cls(
            heartbeat_timeout=default.heartbeat_timeout if timeout is None else timeout,
            keep_job_trees=default.keep_job_trees if keep is None else keep,
        )
