"""The HTTP server's settings: the Host names it answers to besides loopback and its address.

``allowed_hosts`` in config.yaml (a list) or ``TRAINOPS_ALLOWED_HOSTS`` (comma-separated);
``*`` allows any (docs/api.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["ServerSettings"]


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the server's Host guard allows."""

    allowed_hosts: tuple[str, ...] = ()
    """Extra Host names the server answers to (beyond loopback and its bind address); "*": any."""

    @classmethod
    def read(cls, source: SettingsSource) -> ServerSettings:
        """``allowed_hosts``; ``TRAINOPS_ALLOWED_HOSTS`` wins (set but empty: none)."""
        hosts = source.names("allowed_hosts", "TRAINOPS_ALLOWED_HOSTS", noun="host names")
        return cls(allowed_hosts=hosts or ())
