"""A pytest plugin that registers two throwaway services (only in the child pytest that
test_service_conformance.py starts to show that a newly registered service is picked up).

``throwaway-good`` keeps to the contract; ``throwaway-broken`` raises when it hears that a job
ended, which the conformance suite must catch.
"""

from __future__ import annotations

from trainops.control import ENDED
from trainops.control.services import SERVICES, ControlService, ServiceContext
from trainops.store import JobRecord


class Good(ControlService):
    name = "throwaway-good"
    period = 0.5

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.heard: list[str] = []

    def job_changed(self, job: JobRecord) -> None:
        self.heard.append(job.name)


class Broken(Good):
    name = "throwaway-broken"

    def job_changed(self, job: JobRecord) -> None:
        if job.status in ENDED:
            raise RuntimeError("a throwaway service's bug")


SERVICES.register("throwaway-good", Good)
SERVICES.register("throwaway-broken", Broken)
