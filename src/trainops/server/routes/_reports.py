"""The report routes: ``GET /api/v1/jobs/{name}/profiler-report``, the profiler report's data,
``GET /api/v1/jobs/{name}/cost``, the job's cost advice, and ``GET
/api/v1/jobs/{name}/checkpoints``, what each host's checkpoint sync did.

The reports are computed here, on the server, from the store and the job's profiler prefix, so a
client needs no access to the object store (a remote server's store may be out of its reach);
the CLI and the web UI render the same JSON (``trainops.report.render_html``).
"""

from __future__ import annotations

import time
from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.cost import job_spot_cost
from trainops.report import NoProfilerDataError, job_report
from trainops.server._http import ApiError
from trainops.server._routing import Operation, Param
from trainops.server.routes._shapes import API, json_object
from trainops.store import CheckpointRecord

#: Bounds of an interruption rate a cost question may ask about (per hour: one a second at most).
MIN_RATE_PER_HOUR = 0.001
MAX_RATE_PER_HOUR = 3600.0
MIN_CHECKPOINT_SECONDS = 0.001
MAX_CHECKPOINT_SECONDS = 86400.0

__all__ = ["ReportRoutes"]

_OBJECT = {"type": "object"}
_REPORT = {
    "type": "object",
    "required": ["version", "job", "sections", "advice"],
    "properties": {
        "version": {"type": "integer"},
        "job": _OBJECT,
        "sections": _OBJECT,
        "advice": _OBJECT,
        "timelines": _OBJECT,
        "heatmaps": _OBJECT,
    },
    "description": "the profiler report's data (docs/profiling-report.md)",
}


class ReportRoutes:
    """A job's profiler report, computed from ``controller``'s store and ``settings``."""

    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller = controller
        self.settings = settings

    # The handler's docstring is its operation's description in the OpenAPI document.

    def profiler_report(self, name: str) -> dict[str, Any]:
        """The profiler report of a job, running or ended: job summary, system usage, framework
        metrics, rules, step durations, GPU, batch size, CPU and I/O bottlenecks, load
        balancing, GPU memory, and right-sizing advice. 404 for an unknown job or one without
        profiler data."""
        self.controller.job(name)
        try:
            return job_report(self.controller.store, self.settings, name, now=time.time())
        except NoProfilerDataError as exc:
            raise ApiError(404, "not_found", str(exc)) from None

    def cost(
        self, name: str, interruptions_per_hour: float | None, checkpoint_seconds: float | None
    ) -> dict[str, Any]:
        """A job's cost advice, running or ended: its billable and training seconds, its cost
        on-demand and at spot (the catalog's estimate unless config.yaml gives a price; each
        price says where it comes from), each interruption's lost work and restart overhead,
        and the checkpoint interval that costs least at ``interruptions_per_hour`` (Young/Daly;
        default: the rate this job saw) and ``checkpoint_seconds`` to write one (default: as the
        job's checkpoint records measured it). 404 for an unknown job."""
        self.controller.job(name)
        own = self.settings.spot
        return job_spot_cost(self.controller.store, name, own, time.time(),
                             interruptions_per_hour, checkpoint_seconds).to_json()  # fmt: skip

    def checkpoints(self, name: str) -> dict[str, Any]:
        """A job's checkpoint records, oldest first: per host and attempt, what its checkpoint
        sync restored at start, synced (every finished file uploaded), failed to sync or left
        behind, with the files and bytes, the newest file's write time, the seconds the script
        took writing it and the sync took uploading it, and why (a failure). 404 for an
        unknown job."""
        self.controller.job(name)
        records = self.controller.store.checkpoints(name)
        return {"TrainingJobName": name, "Checkpoints": [_checkpoint(r) for r in records]}

    def operations(self) -> list[Operation]:
        """``GET /jobs/{name}/profiler-report``, ``.../cost`` and ``.../checkpoints``."""
        return [
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/profiler-report",
                self.profiler_report,
                errors=(404,),
                auth="token",
                returns=_REPORT,
            ),
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/cost",
                self.cost,
                params=(_RATE, _CHECKPOINT_SECONDS),
                errors=(400, 404),
                auth="token",
                returns=_COST,
            ),
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/checkpoints",
                self.checkpoints,
                errors=(404,),
                auth="token",
                returns=_CHECKPOINTS,
            ),
        ]


def _checkpoint(record: CheckpointRecord) -> dict[str, Any]:
    data = record.event_data()
    return {"Host": record.host, "Attempt": record.attempt,
            **{_CHECKPOINT_KEYS[k]: v for k, v in data.items()}}  # fmt: skip


_CHECKPOINT_KEYS = {
    "kind": "Kind", "at": "At", "files": "Files", "bytes": "Bytes", "newest_write": "NewestWrite",
    "write_seconds": "WriteSeconds", "upload_seconds": "UploadSeconds", "reason": "Reason",
}  # fmt: skip


_RATE = Param(
    "interruptions_per_hour",
    "number",
    ge=MIN_RATE_PER_HOUR,
    le=MAX_RATE_PER_HOUR,
    description="the interruption rate to advise a checkpoint interval for "
    "(default: the rate this job saw)",
)
_CHECKPOINT_SECONDS = Param(
    "checkpoint_seconds",
    "number",
    ge=MIN_CHECKPOINT_SECONDS,
    le=MAX_CHECKPOINT_SECONDS,
    description="seconds writing a checkpoint takes the script (default: as the job's "
    "checkpoint records measured it)",
)
_NUMBER = {"type": "number"}
_COST = json_object(
    "TrainingJobName",
    "Prices",
    "BillableTimeInSeconds",
    "OnDemandCostUsd",
    "SpotCostUsd",
    "Interruptions",
    "CheckpointInterval",
    TrainingJobName={"type": "string"},
    Prices={"type": "object"},
    BillableTimeInSeconds=_NUMBER,
    OnDemandCostUsd=_NUMBER,
    SpotCostUsd=_NUMBER,
    Interruptions={"type": "array", "items": {"type": "object"}},
    CheckpointInterval={"type": "object"},
)
_CHECKPOINTS = json_object(
    "TrainingJobName",
    "Checkpoints",
    TrainingJobName={"type": "string"},
    Checkpoints={"type": "array", "items": {"type": "object"}},
)
