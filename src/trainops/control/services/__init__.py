"""Control-plane services: work beside the scheduler and monitor (see ``_base`` for the contract).

Kinds register a factory in :data:`SERVICES`; the controller makes one of each (a factory may
decline) plus its own tree retention, and runs them in a :class:`ServiceHub`.
docs/internals/services.md says how to add one.
"""

from __future__ import annotations

from trainops.control.services._base import (
    ControlService,
    HostRunner,
    JobSubmitter,
    ServiceContext,
    ServiceFactory,
)
from trainops.control.services._hub import ServiceHub
from trainops.control.services._retention import RetentionService

__all__ = [
    "SERVICES",
    "ControlService",
    "HostRunner",
    "JobSubmitter",
    "RetentionService",
    "ServiceContext",
    "ServiceFactory",
    "ServiceHub",
    "register_service",
]

#: name -> factory, in start order.
SERVICES: dict[str, ServiceFactory] = {}


def register_service(name: str, factory: ServiceFactory) -> None:
    """Add a kind of service; a name registered twice is a programming error."""
    if name in SERVICES:
        raise ValueError(f"a service named {name!r} is registered already")
    SERVICES[name] = factory
