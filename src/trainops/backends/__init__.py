"""Backends: where host agents run. An ABC in ``_base``, one private module per implementation.

The control plane reserves capacity for a whole job, launches one agent per host through the
backend, watches the agents' liveness and ends them on stop; ``BACKENDS`` lists every
implementation and ``tests/backends`` holds the conformance suite they all pass.

Names are imported on first use, so that importing the package's settings (``_settings``,
which every process reads) does not import the rest of it.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.backends._base import (
        JOURNAL_FILE,
        AgentHandle,
        Backend,
        HostPlacement,
        NodeInfo,
        Preemption,
        ProcessRef,
        parse_journal,
    )
    from trainops.backends._capacity import (
        Capacity,
        CapacityNeverFits,
        CapacityShortage,
        HostDemand,
        Slots,
        host_demand,
    )
    from trainops.backends._local import LocalBackend
    from trainops.backends._registry import BACKENDS, backend_for

__all__ = [
    "BACKENDS",
    "JOURNAL_FILE",
    "AgentHandle",
    "Backend",
    "Capacity",
    "CapacityNeverFits",
    "CapacityShortage",
    "HostDemand",
    "HostPlacement",
    "LocalBackend",
    "NodeInfo",
    "Preemption",
    "ProcessRef",
    "Slots",
    "backend_for",
    "host_demand",
    "parse_journal",
]

_MODULE_OF = {
    "JOURNAL_FILE": "trainops.backends._base",
    "AgentHandle": "trainops.backends._base",
    "Backend": "trainops.backends._base",
    "HostPlacement": "trainops.backends._base",
    "NodeInfo": "trainops.backends._base",
    "Preemption": "trainops.backends._base",
    "ProcessRef": "trainops.backends._base",
    "parse_journal": "trainops.backends._base",
    "Capacity": "trainops.backends._capacity",
    "CapacityNeverFits": "trainops.backends._capacity",
    "CapacityShortage": "trainops.backends._capacity",
    "HostDemand": "trainops.backends._capacity",
    "Slots": "trainops.backends._capacity",
    "host_demand": "trainops.backends._capacity",
    "LocalBackend": "trainops.backends._local",
    "BACKENDS": "trainops.backends._registry",
    "backend_for": "trainops.backends._registry",
}

__getattr__, __dir__ = lazy_names("trainops.backends", globals(), _MODULE_OF)
