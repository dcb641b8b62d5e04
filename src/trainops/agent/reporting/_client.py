"""The agent API client over the shared keep-alive transport (``trainops._transport``).

A connection the server closed while idle is retried once at once, which is safe because the
calls are idempotent (events carry sequence numbers; a spawn's reports only move it forward;
opening a spawn is the one call that is not, and its caller gives up on an error). When the server cannot be reached,
:meth:`AgentClient.refresh_server` re-reads ``$TRAINOPS_HOME/server.json`` in case the control
plane came back on another port.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from trainops._errors import ServerError
from trainops._transport import HttpTransport, TransportError
from trainops.protocol import AGENT_API_PREFIX, AgentEvent, Assignment, EventReply

__all__ = ["AgentApiError", "AgentClient", "fetch_assignment"]


class AgentApiError(ServerError):
    """An agent API call failed; ``status`` is the HTTP status, ``None`` when unreachable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status >= 500 or self.status in (408, 429)


class AgentClient:
    """Calls of one host agent (one job, one host) to the control plane."""

    def __init__(
        self,
        server_url: str,
        token: str,
        job_name: str,
        host: str,
        *,
        server_file: Path | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._path = f"{AGENT_API_PREFIX}/jobs/{quote(job_name)}/hosts/{quote(host)}"
        self._server_file = server_file
        try:
            self._http = HttpTransport(server_url, {"Authorization": f"Bearer {token}"}, timeout)
        except ValueError:
            raise AgentApiError(
                f"{server_url!r} is not an http(s) URL of a trainops server"
            ) from None

    @property
    def server_url(self) -> str:
        return self._http.base_url

    def get_assignment(self, attempt: int) -> Assignment:
        raw = self._call("GET", f"{self._path}/assignment?attempt={attempt}", None)
        return Assignment.from_json(raw)

    def post_events(self, attempt: int, events: Sequence[AgentEvent]) -> EventReply:
        body = {"attempt": attempt, "events": [event.to_json() for event in events]}
        raw = self._call("POST", f"{self._path}/events", json.dumps(body).encode("utf-8"))
        return EventReply.from_json(raw)

    def post_raw_events(self, attempt: int, events_json: bytes) -> EventReply:
        """Post events already encoded as JSON objects separated by commas (journal lines)."""
        body = b'{"attempt":%d,"events":[%b]}' % (attempt, events_json)
        return EventReply.from_json(self._call("POST", f"{self._path}/events", body))

    def open_spawn(self, attempt: int, target: str, words: Sequence[str]) -> dict[str, Any]:
        """Ask ``target`` to run ``words`` (see ``trainops.control._relay``)."""
        body = {"attempt": attempt, "target": target, "words": list(words)}
        return self._call("POST", f"{self._path}/spawns", json.dumps(body).encode("utf-8"))

    def spawn_status(self, attempt: int, spawn_id: str) -> dict[str, Any]:
        return self._call("GET", f"{self._path}/spawns/{quote(spawn_id)}?attempt={attempt}", None)

    def report_spawn(
        self,
        attempt: int,
        spawn_id: str,
        state: str,
        exit_code: int | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        body = {"attempt": attempt, "state": state, "exit_code": exit_code, "error": error}
        path = f"{self._path}/spawns/{quote(spawn_id)}"
        return self._call("POST", path, json.dumps(body).encode("utf-8"))

    def refresh_server(self) -> bool:
        """Switch to the URL in ``server.json`` if it names another server; ``True`` if so."""
        if self._server_file is None:
            return False
        try:
            url = json.loads(self._server_file.read_text(encoding="utf-8"))["url"]
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if not isinstance(url, str) or url.rstrip("/") == self.server_url:
            return False
        try:
            self._http.rebase(url)
        except ValueError:
            return False
        return True

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, raw=body)
        except TransportError as exc:
            raise AgentApiError(
                f"{method} {self.server_url}{path}: cannot reach the server ({exc})"
            ) from None
        if response.status >= 300:
            raise AgentApiError(
                f"{method} {self.server_url}{path}: HTTP {response.status} {response.text[:300]}",
                status=response.status,
            )
        try:
            parsed: dict[str, Any] = response.json()
        except ValueError:
            raise AgentApiError(f"{method} {self.server_url}{path}: reply is not JSON") from None
        return parsed


def fetch_assignment(
    client: AgentClient,
    attempt: int,
    *,
    deadline_s: float = 120.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Assignment:
    """Ask for the assignment until it comes, backing off up to 2 s between tries."""
    give_up = time.monotonic() + deadline_s
    delay = 0.05
    while True:
        try:
            return client.get_assignment(attempt)
        except AgentApiError as exc:
            if not exc.retryable or time.monotonic() + delay > give_up:
                raise
        client.refresh_server()
        sleep(delay)
        delay = min(delay * 2, 2.0)
