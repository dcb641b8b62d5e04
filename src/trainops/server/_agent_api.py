"""The agent API (``/agent/v1``): host agents fetch their assignment and report events.

Every call carries the job's agent token; the reply to a report acknowledges the events stored
and carries the agent's commands (stop). See docs/internals/agent-protocol.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from trainops.control import JobController
from trainops.protocol import AgentEvent
from trainops.server._http import ApiError, bearer_token

__all__ = ["EventBatch", "agent_router"]


class EventBatch(BaseModel):
    """Events of one host and attempt, numbered from 1 (``AgentEvent.to_json()`` each)."""

    attempt: int
    events: list[dict[str, Any]]


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

    @router.post("/jobs/{job}/hosts/{host}/events")
    def events(job: str, host: str, batch: EventBatch, request: Request) -> dict[str, Any]:
        token = token_of(request)
        try:
            parsed = [AgentEvent.from_json(raw) for raw in batch.events]
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, "bad_request", f"malformed event: {exc}") from None
        return controller.report(job, host, batch.attempt, token, parsed).to_json()

    return router
