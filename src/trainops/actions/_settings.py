"""The actions' settings: the networks a rule's webhook may reach besides public addresses.

``webhook_networks`` in config.yaml (a list) or ``TRAINOPS_WEBHOOK_NETWORKS``
(comma-separated): ``loopback``, ``link-local``, ``private`` or a network such as
``10.1.0.0/16``. None by default (``_destinations`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource
from trainops.actions._destinations import NETWORK_NAMES, WebhookPolicy

__all__ = ["ActionSettings"]

_VARIABLE = "TRAINOPS_WEBHOOK_NETWORKS"


@dataclass(frozen=True, slots=True)
class ActionSettings:
    """What the actions of rules may do beyond the defaults."""

    webhook_networks: tuple[str, ...] = ()
    """Networks a webhook may reach besides public addresses (see :class:`WebhookPolicy`)."""

    @classmethod
    def read(cls, source: SettingsSource) -> ActionSettings:
        """``webhook_networks``; ``TRAINOPS_WEBHOOK_NETWORKS`` wins (set but empty: none)."""
        names = source.names("webhook_networks", _VARIABLE, noun="networks") or ()
        for name in names:
            try:
                WebhookPolicy.from_names([name])
            except ValueError:
                raise source.entry_error(
                    "webhook_networks",
                    _VARIABLE,
                    name,
                    "is not a network (10.1.0.0/16, fd00::/8) "
                    f"nor one of {', '.join(NETWORK_NAMES)}",
                ) from None
        return cls(webhook_networks=names)
