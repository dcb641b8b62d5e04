"""Stop requests: from a ``stop`` command or SIGTERM, delivered to whatever process runs.

A request only records its reason and grace period (plain attributes, no locks), because it may
come from a signal handler that interrupts the thread holding any lock. The supervising loop
delivers it: SIGTERM to the process group now, SIGKILL once the grace period has passed. A
later request may shorten the grace period, never lengthen it.

A stop that is a spot interruption (``Command.interrupted``) is delivered the same way, its
grace period being the interruption's notice; ``interrupted`` stays set once one came, so the
host's last checkpoint sync knows to report what it left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from trainops.agent.reporting._reporter import Reporter
from trainops.protocol import Command

__all__ = ["StopControl", "Stoppable"]


class Stoppable(Protocol):
    """What a stop is delivered to: one process or a host's process group."""

    def terminate(self, grace_seconds: float) -> None: ...


class StopControl:
    """The host's pending stop, if any."""

    def __init__(self, grace_seconds: float) -> None:
        self.reason: str | None = None
        self.grace_seconds = grace_seconds
        self._requests = 0
        self._delivered = 0
        self.requested_at: float | None = None  # when the first stop came (Unix time)
        self.interrupted = False  # a spot interruption's stop came

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(
        self, reason: str, grace_seconds: float | None = None, *, interrupted: bool = False
    ) -> None:
        """Record a stop; one that changes nothing (the control plane repeats its stop command
        in every reply) is not a new request, so it is neither delivered nor logged again."""
        self.interrupted = self.interrupted or interrupted
        grace = self.grace_seconds
        if grace_seconds is not None:
            grace = min(self.grace_seconds, grace_seconds) if self.requested else grace_seconds
        if self.requested and grace >= self.grace_seconds:
            return
        self.grace_seconds = grace
        self.requested_at = self.requested_at or time.time()
        self.reason = self.reason or reason
        self._requests += 1

    def poll(self, reporter: Reporter) -> None:
        """Take in the ``stop`` commands the control plane sent (and drop the others)."""
        for command in reporter.commands():
            self.take(command)

    def take(self, command: Command) -> bool:
        """Take in ``command`` if it is a stop; ``True`` if it was."""
        if command.kind != "stop":
            return False
        reason = command.reason or "stop requested"
        self.request(reason, command.grace_seconds, interrupted=command.interrupted)
        return True

    def deliver(self, process: Stoppable, log: Callable[[str], None]) -> None:
        """Pass a new request on to ``process`` (SIGTERM now, SIGKILL after the grace)."""
        if self._delivered < self._requests:
            if self.interrupted:
                log(
                    f"Interrupted ({self.reason}): SIGTERM to every process now, SIGKILL in "
                    f"{self.grace_seconds:g} s (the notice); the checkpoints sync after that"
                )
            else:
                log(f"Stopping ({self.reason}); grace period {self.grace_seconds:g} s")
            process.terminate(self.grace_seconds)
            self._delivered = self._requests
