"""How the Ray backend learns that a node is taken away: drained for preemption, or lost.

Two ways, both reported as :class:`~trainops.backends.Preemption` by ``take_preemptions``:

- *Drained* (the notice): Ray's autoscaler, before a spot instance is reclaimed, drains its node
  (``ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds N`` does
  the same by hand). The GCS then lists the node among its draining nodes with the deadline, and
  schedules nothing new there; Ray does not end the node's work itself. The node is reported
  with that deadline (a drain without one gets :data:`DEFAULT_NOTICE_S`, EC2's two minutes), so
  its hosts get the notice before it goes.
- *Lost* (no notice): the node died. Ray writes it off only once its health checks have failed
  (about 10-15 s), while the actor of a host there fails within a second or two; so an actor
  that fails on a node whose raylet no longer answers reports its node at once
  (:meth:`NodeWatch.lost`), and the node's death in the GCS table reports it otherwise.

Each node is reported once. Between a host's actor failing on a lost node and the control plane
taking that node's report, the host is said to be still alive (at most :data:`HOLD_S`), so that
the control plane hears "node lost" before "host lost" and treats a spot job's host as
interrupted, not as failed.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainops.backends._base import Preemption

__all__ = ["DEFAULT_NOTICE_S", "HOLD_S", "NodeWatch", "node_name", "raylet_answers"]

DEFAULT_NOTICE_S = 120.0
HOLD_S = 5.0
_PROBE_TIMEOUT_S = 1.0
# GcsNodeInfo.NodeDeathInfo.Reason, as ``ray.nodes()`` gives it (``DeathReason``).
_DEATHS = {
    1: "was stopped",
    2: "was lost",
    3: "was reclaimed (drained for preemption)",
    4: "was ended as idle",
}


def node_name(node: Mapping[str, Any]) -> str:
    """``<address>/<node id's first 12>``: how ``describe`` and a preemption name a Ray node."""
    return f"{node.get('NodeManagerAddress', '?')}/{str(node['NodeID'])[:12]}"


class NodeWatch:
    """The nodes reported taken away so far, and those found lost but not yet reported."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._reported: set[str] = set()  # node ids
        self._queued: dict[str, tuple[Preemption, float]] = {}  # node id -> (report, when)

    def poll(
        self, draining: Mapping[str, int], nodes: Sequence[Mapping[str, Any]]
    ) -> list[Preemption]:
        """What to report now: nodes found lost since the last poll, nodes the GCS drains
        (``draining``: node id -> deadline in epoch ms, 0 for none), nodes it lists dead."""
        by_id = {str(node["NodeID"]): node for node in nodes}
        with self._lock:
            found = [report for report, _ in self._queued.values()]
            self._reported.update(self._queued)
            self._queued.clear()
            for node_id, deadline_ms in sorted(draining.items()):
                if node_id not in self._reported:
                    node = by_id.get(node_id, {"NodeID": node_id})
                    found.append(self._drained(node, deadline_ms))
                    self._reported.add(node_id)
            for node_id, node in by_id.items():
                if not node.get("Alive") and node_id not in self._reported:
                    found.append(_dead(node))
                    self._reported.add(node_id)
        return found

    def lost(self, node: Mapping[str, Any], why: str) -> None:
        """Report ``node`` at the next poll as gone (a host's actor failed there and its raylet
        no longer answers), unless it was reported already."""
        node_id = str(node["NodeID"])
        with self._lock:
            if node_id in self._reported or node_id in self._queued:
                return
            reason = f"the Ray node {node_name(node)} was lost: {why}"
            self._queued[node_id] = (Preemption(node_name(node), reason, None), time.monotonic())

    def known(self, node_id: str) -> bool:
        """Whether ``node_id`` has been reported, or found lost and is to be."""
        with self._lock:
            return node_id in self._reported or node_id in self._queued

    def holding(self, node_id: str) -> bool:
        """Whether the hosts of ``node_id`` are to be said alive a moment more: the node was
        found lost and the control plane has not taken that report yet (for at most HOLD_S)."""
        with self._lock:
            queued = self._queued.get(node_id)
        return queued is not None and time.monotonic() - queued[1] < HOLD_S

    def _drained(self, node: Mapping[str, Any], deadline_ms: int) -> Preemption:
        now = self._clock()
        if deadline_ms > 0:
            deadline = deadline_ms / 1000.0
            notice = f"it goes in {max(0.0, deadline - now):.0f} s"
        else:
            deadline = now + DEFAULT_NOTICE_S
            notice = f"no deadline given: {DEFAULT_NOTICE_S:.0f} s of notice assumed"
        reason = f"Ray is draining node {node_name(node)} for preemption ({notice})"
        return Preemption(node_name(node), reason, deadline)


def _dead(node: Mapping[str, Any]) -> Preemption:
    how = _DEATHS.get(int(node.get("DeathReason") or 0), "died")
    # Ray's words, which whoever drained the node wrote: one printable line, kept short.
    text = "".join(c if c.isprintable() else " " for c in str(node.get("DeathReasonMessage") or ""))
    said = " ".join(text.split())[:200]
    reason = f"the Ray node {node_name(node)} {how}" + (f": {said}" if said else "")
    return Preemption(node_name(node), reason, None)


def raylet_answers(node: Mapping[str, Any]) -> bool:
    """Whether the raylet of ``node`` (a ``ray.nodes()`` entry) accepts a connection."""
    address, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not isinstance(address, str) or not isinstance(port, int) or port <= 0:
        return True  # nothing to ask: not evidence of a loss
    try:
        socket.create_connection((address, port), timeout=_PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True
