"""The study routes: record a scaling study as it runs, list the studies, describe one.

``trainops study`` posts its whole study (its status and every row so far) after each
configuration's job starts and ends, so a study run against a server is visible to every client
(and the web UI's studies page) while it runs. A post replaces the study it names.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trainops._errors import JobNotFoundError
from trainops.control import JobController
from trainops.server._routing import Operation, Param
from trainops.server.routes._shapes import API, INTEGER, STRING, json_object
from trainops.store import STUDY_STATUSES, StudyRecord, StudyRowRecord

__all__ = ["StudyRequest", "StudyRoutes", "study_json"]

_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"  # a job name's rule
_LABEL = Field(min_length=1, max_length=256)
_FIGURE = Field(default=None, ge=0, allow_inf_nan=False)
_STUDY = json_object(
    "name", "title", "status", "rows",
    name=STRING, title=STRING, status={"type": "string", "enum": list(STUDY_STATUSES)},
    rows={"type": "array", "items": json_object("label", "instance_count", "status",
                                                 label=STRING, instance_count=INTEGER,
                                                 status=STRING)},
)  # fmt: skip


class StudyRow(BaseModel):
    """One configuration of a study: its job and, once that has ended, its figures."""

    model_config = ConfigDict(extra="forbid")

    label: str = _LABEL
    instance_type: str = _LABEL
    instance_count: int = Field(ge=1, le=10_000)
    processes_per_host: int = Field(ge=1, le=10_000)
    job_name: str | None = Field(default=None, pattern=_NAME)
    status: str = Field(min_length=1, max_length=32)
    throughput: float | None = _FIGURE
    time_to_target_s: float | None = _FIGURE
    billable_seconds: float | None = _FIGURE
    cost_usd: float | None = _FIGURE
    efficiency: float | None = _FIGURE


class StudyRequest(BaseModel):
    """A scaling study as it stands: its name, title, status and rows so far."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_NAME, description="the study's name (a job name's rule)")
    title: str = Field(min_length=1, max_length=256, description="what the study studies")
    status: Literal["InProgress", "Completed", "Failed", "Stopped"]
    target_metric: str | None = Field(default=None, min_length=1, max_length=256)
    rows: list[StudyRow] = Field(default_factory=list, max_length=1000)


def study_json(study: StudyRecord) -> dict[str, Any]:
    """A study as the API answers it (times in seconds since the epoch)."""
    return {
        "name": study.name,
        "title": study.title,
        "status": study.status,
        "target_metric": study.target_metric,
        "creation_time": study.creation_time,
        "last_modified_time": study.last_modified_time,
        "rows": [row.to_json() for row in study.rows],
    }


class StudyRoutes:
    """The scaling studies of ``controller``'s store."""

    def __init__(self, controller: JobController) -> None:
        self.store = controller.store

    def put_study(self, body: StudyRequest) -> dict[str, Any]:
        """Record the study as it stands now (replacing what was recorded under its name)."""
        rows = [StudyRowRecord(**row.model_dump()) for row in body.rows]
        study = self.store.put_study(
            body.name, title=body.title, status=body.status, target_metric=body.target_metric,
            rows=rows, now=time.time(),
        )  # fmt: skip
        return study_json(study)

    def list_studies(self, limit: int) -> dict[str, Any]:
        return {"studies": [study_json(s) for s in self.store.list_studies(limit)]}

    def describe_study(self, name: str) -> dict[str, Any]:
        study = self.store.get_study(name)
        if study is None:
            raise JobNotFoundError(f"no study named {name!r}")
        return study_json(study)

    def operations(self) -> list[Operation]:
        """``POST /studies``, ``GET /studies`` and ``GET /studies/{name}``."""
        path = f"{API}/studies"
        return [
            Operation("POST", path, self.put_study, body=StudyRequest, max_body=1024 * 1024,
                      errors=(400,), auth="token", returns=_STUDY),
            Operation("GET", path, self.list_studies, params=_LIST_PARAMS, errors=(400,),
                      auth="token", description="The studies, newest first.",
                      returns=json_object("studies",
                                          studies={"type": "array", "items": _STUDY})),
            Operation("GET", f"{path}/{{name}}", self.describe_study, errors=(404,),
                      auth="token", returns=_STUDY),
        ]  # fmt: skip


_LIST_PARAMS = (
    Param("limit", "integer", default=50, ge=1, le=1000, description="at most this many"),
)
