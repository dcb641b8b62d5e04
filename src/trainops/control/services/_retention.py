"""Tree retention as a service: sweeps the job directories of ended jobs every minute (see ``trainops.control._retention`` for the policy)."""

from __future__ import annotations

from trainops.control._retention import TreeRetention
from trainops.control.services._base import ControlService

__all__ = ["RetentionService"]

PERIOD_S = 60.0


class RetentionService(ControlService):
    name = "retention"
    period = PERIOD_S

    def __init__(self, retention: TreeRetention) -> None:
        self.retention = retention

    def tick(self) -> None:
        self.retention.sweep()
