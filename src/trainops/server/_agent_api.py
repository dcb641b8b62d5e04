"""The agent API (``/agent/v1``): host agents fetch their assignment and report events.

Every call carries the job's agent token; the reply to a report acknowledges the events stored
and carries the agent's commands (stop, spawn). The spawn routes relay a remote command from one
host of a job to another (a launcher's remote shell, see ``trainops.control._relay``). See
docs/internals/agent-protocol.md.

A report may carry tens of thousands of events: its body is parsed with ``json.loads`` and
checked by hand (no model per event), off the event loop, and stored in one transaction.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from trainops.control import JobController
from trainops.protocol import AgentEvent, SpawnState
from trainops.server._http import ApiError, bearer_token

__all__ = ["EventBatch", "SpawnReport", "SpawnRequest", "agent_router"]


class EventBatch(BaseModel):
    """Events of one host and attempt, numbered from 1 (``AgentEvent.to_json()`` each)."""

    attempt: int
    events: list[dict[str, Any]]


class SpawnRequest(BaseModel):
    """Run ``words`` (a remote shell's command line) on ``target``, a host of the same job."""

    attempt: int = Field(ge=1)
    target: str = Field(min_length=1, max_length=256)
    words: list[str] = Field(min_length=1, max_length=4096)


class SpawnReport(BaseModel):
    """The target host's word on a spawn: started, exited (with its exit code) or failed."""

    attempt: int = Field(ge=1)
    state: SpawnState
    exit_code: int | None = None
    error: str | None = Field(default=None, max_length=10_000)


class SpawnStatus(BaseModel):
    """Where a spawn stands."""

    spawn_id: str
    target: str
    state: SpawnState
    exit_code: int | None
    error: str | None


def agent_router(controller: JobController) -> APIRouter:
    router = APIRouter()

    def token_of(request: Request) -> str:
        token = bearer_token(request)
        if token is None:
            raise ApiError(401, "unauthorized", "agent requests need the job's agent token")
        return token

    @router.get("/jobs/{job}/hosts/{host}/assignment")
    def assignment(
        job: str, host: str, request: Request, attempt: Annotated[int, Query(ge=1)]
    ) -> dict[str, Any]:
        return controller.assignment(job, host, attempt, token_of(request)).to_json()

    def report(job: str, host: str, token: str, body: bytes) -> dict[str, Any]:
        attempt, parsed = parse_batch(body)
        return controller.report(job, host, attempt, token, parsed).to_json()

    @router.post(
        "/jobs/{job}/hosts/{host}/events",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": EventBatch.model_json_schema()}},
            }
        },
    )
    async def events(job: str, host: str, request: Request) -> dict[str, Any]:
        token = token_of(request)
        body = await request.body()
        result: dict[str, Any] = await run_in_threadpool(report, job, host, token, body)
        return result

    @router.post("/jobs/{job}/hosts/{host}/spawns", response_model=SpawnStatus)
    def open_spawn(job: str, host: str, body: SpawnRequest, request: Request) -> dict[str, Any]:
        return controller.open_spawn(
            job, host, body.attempt, token_of(request), body.target, body.words
        )

    @router.get("/jobs/{job}/hosts/{host}/spawns/{spawn_id}", response_model=SpawnStatus)
    def spawn_status(
        job: str, host: str, spawn_id: str, request: Request, attempt: Annotated[int, Query(ge=1)]
    ) -> dict[str, Any]:
        return controller.spawn_status(job, host, attempt, token_of(request), spawn_id)

    @router.post("/jobs/{job}/hosts/{host}/spawns/{spawn_id}", response_model=SpawnStatus)
    def report_spawn(
        job: str, host: str, spawn_id: str, body: SpawnReport, request: Request
    ) -> dict[str, Any]:
        token = token_of(request)
        return controller.report_spawn(
            job, host, body.attempt, token, spawn_id, body.state, body.exit_code, body.error
        )

    return router


def parse_batch(body: bytes) -> tuple[int, list[AgentEvent]]:
    """The attempt and events of an :class:`EventBatch` body; :class:`ApiError` 400 if bad."""
    try:
        raw = json.loads(body)
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ApiError(400, "bad_request", "the body must be an object with attempt and events")
    attempt, events = raw.get("attempt"), raw.get("events")
    if type(attempt) is not int or not isinstance(events, list):
        raise ApiError(400, "bad_request", "attempt must be an integer and events a list")
    try:
        return attempt, [AgentEvent.from_json(event) for event in events]
    except (KeyError, TypeError, ValueError) as exc:
        raise ApiError(400, "bad_request", f"malformed event: {exc}") from None
