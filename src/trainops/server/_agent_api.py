"""The agent API (``/agent/v1``): host agents fetch their assignment and report events.

Every call carries its host's agent token (one per host of one attempt, revoked when the host or
the job ends), checked before the body is read; the reply to a report acknowledges the events stored
and carries the agent's commands (stop, spawn). The spawn routes relay a remote command from one
host of a job to another (a launcher's remote shell, see ``trainops.control._relay``). See
docs/internals/agent-protocol.md.

A report may carry tens of thousands of events: its body is parsed one event at a time and
checked by hand (no model per event), off the event loop, and stored in one transaction.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainops.control import JobController
from trainops.protocol import AgentEvent, SpawnState
from trainops.server._http import ApiError
from trainops.server._routing import SQLITE_INT_MAX, Operation, Param

__all__ = ["EventBatch", "SpawnReport", "SpawnRequest", "agent_operations", "parse_batch"]

AGENT = "/agent/v1/jobs/{job}/hosts/{host}"
_ATTEMPT = Param("attempt", "integer", required=True, ge=1, le=SQLITE_INT_MAX)
_ANY_OBJECT = {"type": "object", "additionalProperties": True}
# An agent posts about 1 MiB of events at a time; one event may be larger (lines of up to 1 MiB
# characters, up to 6 bytes each once escaped in JSON), so a batch stays well under 16 MiB.
MAX_EVENTS_BODY = 16 * 1024 * 1024


class EventBatch(BaseModel):
    """Events of one host and attempt, numbered from 1 (``AgentEvent.to_json()`` each)."""

    # Only documents the body (parse_batch reads it): built when the document is.
    model_config = ConfigDict(defer_build=True)

    attempt: int = Field(ge=1, le=SQLITE_INT_MAX)
    events: list[dict[str, Any]]


class SpawnRequest(BaseModel):
    """Run ``words`` (a remote shell's command line) on ``target``, a host of the same job."""

    model_config = ConfigDict(defer_build=True)

    attempt: int = Field(ge=1, le=SQLITE_INT_MAX)
    target: str = Field(min_length=1, max_length=256)
    words: list[str] = Field(min_length=1, max_length=4096)


class SpawnReport(BaseModel):
    """The target host's word on a spawn: started, exited (with its exit code) or failed."""

    model_config = ConfigDict(defer_build=True)

    attempt: int = Field(ge=1, le=SQLITE_INT_MAX)
    state: SpawnState
    exit_code: int | None = None
    error: str | None = Field(default=None, max_length=10_000)


class SpawnStatus(BaseModel):
    """Where a spawn stands (the answer of every spawn route; ``Spawn.to_json()``)."""

    model_config = ConfigDict(defer_build=True)

    spawn_id: str
    target: str
    state: SpawnState
    exit_code: int | None
    error: str | None


def agent_operations(controller: JobController) -> list[Operation]:
    """Every agent route; each needs its host's agent token (``token``), checked by the controller
    before the body is read (``check_agent``) and again, with the body's attempt, by the handler."""

    def assignment(job: str, host: str, token: str, attempt: int) -> dict[str, Any]:
        return controller.assignment(job, host, attempt, token).to_json()

    def events(job: str, host: str, token: str, body: bytes) -> dict[str, Any]:
        # The body is read on the event loop, parsed and stored on a worker thread.
        attempt, parsed = parse_batch(body)
        return controller.report(job, host, attempt, token, parsed).to_json()

    def open_spawn(job: str, host: str, token: str, body: SpawnRequest) -> dict[str, Any]:
        return controller.open_spawn(job, host, body.attempt, token, body.target, body.words)

    def spawn_status(
        job: str, host: str, spawn_id: str, token: str, attempt: int
    ) -> dict[str, Any]:
        return controller.spawn_status(job, host, attempt, token, spawn_id)

    def report_spawn(
        job: str, host: str, spawn_id: str, token: str, body: SpawnReport
    ) -> dict[str, Any]:
        return controller.report_spawn(
            job, host, body.attempt, token, spawn_id, body.state, body.exit_code, body.error
        )

    errors = (400, 409)
    spawn = f"{AGENT}/spawns/{{spawn_id}}"
    return [
        Operation(
            "GET",
            f"{AGENT}/assignment",
            assignment,
            params=(_ATTEMPT,),
            errors=errors,
            auth="agent",
            check_agent=controller.authenticate,
            returns=_ANY_OBJECT,
            description="What the host runs: the job's spec, code and hosts, and its resources.",
        ),
        Operation(
            "POST",
            f"{AGENT}/events",
            events,
            body=EventBatch,
            raw_body=True,
            max_body=MAX_EVENTS_BODY,
            errors=errors,
            auth="agent",
            check_agent=controller.authenticate,
            returns=_ANY_OBJECT,
            description="Store the host's events; the reply acknowledges them and carries its "
            "commands.",
        ),
        Operation(
            "POST",
            f"{AGENT}/spawns",
            open_spawn,
            body=SpawnRequest,
            errors=errors,
            auth="agent",
            check_agent=controller.authenticate,
            returns=SpawnStatus,
        ),
        Operation(
            "GET",
            spawn,
            spawn_status,
            params=(_ATTEMPT,),
            errors=(*errors, 404),
            auth="agent",
            check_agent=controller.authenticate,
            returns=SpawnStatus,
        ),
        Operation(
            "POST",
            spawn,
            report_spawn,
            body=SpawnReport,
            errors=(*errors, 404),
            auth="agent",
            check_agent=controller.authenticate,
            returns=SpawnStatus,
        ),
    ]


def parse_batch(body: bytes | bytearray) -> tuple[int, list[AgentEvent]]:
    """The attempt and events of an :class:`EventBatch` body; :class:`ApiError` 400 if bad.

    Read in pieces: each event is decoded and made an :class:`AgentEvent` on its own, so the
    parsed JSON of the whole batch (a dict per event besides the event itself) is never held.
    """
    try:
        return _Batch(body.decode("utf-8")).parse()
    except UnicodeDecodeError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "bad_request", "the body is not JSON: it nests too deeply") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_SHAPE = "attempt must be an integer and events a list"


class _Batch:
    """A cursor over a batch's text, reading its object one member (and event) at a time."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def parse(self) -> tuple[int, list[AgentEvent]]:
        if self._next() != "{":
            raise ApiError(400, "bad_request", "the body must be an object with attempt and events")
        self.at += 1
        attempt: object = None
        events: list[AgentEvent] | None = None
        if self._next() == "}":
            self.at += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str):
                    self._fail("Expecting property name enclosed in double quotes")
                self._expect(":")
                if key == "events":
                    events = self._events()
                elif key == "attempt":
                    attempt = self._value()
                else:
                    self._value()
                if self._next() != ",":
                    break
                self.at += 1
            self._expect("}")
        if self._next() != "":
            self._fail("Extra data")
        if type(attempt) is not int or events is None:
            raise ApiError(400, "bad_request", _SHAPE)
        if not 1 <= attempt <= SQLITE_INT_MAX:
            raise ApiError(400, "bad_request", f"attempt must be 1 to {SQLITE_INT_MAX}")
        return attempt, events

    def _events(self) -> list[AgentEvent]:
        if self._next() != "[":
            raise ApiError(400, "bad_request", _SHAPE)
        self.at += 1
        events: list[AgentEvent] = []
        if self._next() == "]":
            self.at += 1
            return events
        while True:
            raw = self._value()
            try:
                events.append(AgentEvent.from_json(raw))
            except (KeyError, TypeError, ValueError) as exc:
                raise ApiError(400, "bad_request", f"malformed event: {exc}") from None
            if self._next() == ",":
                self.at += 1
                continue
            self._expect("]")
            return events

    def _value(self) -> Any:
        self._next()
        value, self.at = _DECODER.raw_decode(self.text, self.at)
        return value

    def _next(self) -> str:
        """The next character that is not white space ('' at the end); the cursor moves to it."""
        match = _SPACE.match(self.text, self.at)
        self.at = match.end() if match else self.at
        return self.text[self.at : self.at + 1]

    def _expect(self, char: str) -> None:
        if self._next() != char:
            self._fail(f"Expecting {char!r} delimiter")
        self.at += 1

    def _fail(self, message: str) -> None:
        raise json.JSONDecodeError(message, self.text, self.at)
