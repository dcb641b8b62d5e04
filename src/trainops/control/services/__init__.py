"""Control-plane services: work beside the scheduler and monitor (see ``_base`` for the contract).

Each kind's factory is registered in :data:`SERVICES` (a :class:`~trainops._registry.Registry`,
in start order) by the package that owns it (``chaos``, which plays spot jobs' rehearsal
interruptions, here); the controller makes one of each (a factory may
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
from trainops.control.services._chaos import (
    CHAOS_SOURCE,
    ChaosEvent,
    ChaosService,
    chaos_schedule,
    chaos_service,
)
from trainops.control.services._hub import ServiceHub
from trainops.control.services._retention import RetentionService

__all__ = [
    "CHAOS_SOURCE",
    "SERVICES",
    "ChaosEvent",
    "ChaosService",
    "ControlService",
    "HostRunner",
    "Interrupter",
    "JobSubmitter",
    "RetentionService",
    "ServiceContext",
    "ServiceFactory",
    "ServiceHub",
    "chaos_schedule",
    "register_service",
]

#: name -> factory, in start order.
SERVICES: Registry[ServiceFactory] = Registry("service", error=ValueError)


def register_service(name: str, factory: ServiceFactory) -> None:
    """Add a kind of service (``SERVICES.register``); a name taken already is refused."""
    SERVICES.register(name, factory)


register_service("chaos", chaos_service)  # plays the spec's ``chaos:`` schedule (spot jobs)
