"""Backends: where host agents run. An ABC in ``_base``, one private module per implementation.

The control plane reserves capacity for a whole job, launches one agent per host through the
backend, watches the agents' liveness and ends them on stop; ``BACKENDS`` lists every
implementation and ``tests/backends`` holds the conformance suite they all pass.
"""

from trainops.backends._base import (
    JOURNAL_FILE,
    AgentHandle,
    Backend,
    HostPlacement,
    NodeInfo,
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
    "ProcessRef",
    "Slots",
    "backend_for",
    "host_demand",
    "parse_journal",
]
