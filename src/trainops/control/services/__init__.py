"""Control-plane services: work beside the scheduler and monitor (see ``_base`` for the contract).

Each kind's factory is registered in :data:`SERVICES` (a :class:`~trainops._registry.Registry`,
in start order) by the package that owns it; the controller makes one of each (a factory may
decline) plus its own tree retention, and runs them in a :class:`ServiceHub`. Every registered
service passes tests/control/test_service_conformance.py. docs/internals/services.md says how to
add one.
"""

from __future__ import annotations

from trainops._registry import Registry
from trainops.control.services._base import (
    ControlService,
    HostRunner,
    Interrupter,
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
    "Interrupter",
    "JobSubmitter",
    "RetentionService",
    "ServiceContext",
    "ServiceFactory",
    "ServiceHub",
    "register_service",
]

#: name -> factory, in start order.
SERVICES: Registry[ServiceFactory] = Registry("service", error=ValueError)


def register_service(name: str, factory: ServiceFactory) -> None:
    """Add a kind of service (``SERVICES.register``); a name taken already is refused."""
    SERVICES.register(name, factory)
