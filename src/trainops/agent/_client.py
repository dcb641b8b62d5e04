"""The agent API client: two calls over one keep-alive ``http.client`` connection.

``http.client`` keeps the agent's imports small (no httpx); a connection the server closed while
idle is retried once at once, which is safe because both calls are idempotent (events carry
sequence numbers). When the server cannot be reached, :meth:`AgentClient.refresh_server`
re-reads ``$TRAINOPS_HOME/server.json`` in case the control plane came back on another port.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from trainops._errors import ServerError
from trainops.protocol import AGENT_API_PREFIX, AgentEvent, Assignment, EventReply

__all__ = ["AgentApiError", "AgentClient", "fetch_assignment"]

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


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
        self._token = token
        self._path = f"{AGENT_API_PREFIX}/jobs/{quote(job_name)}/hosts/{quote(host)}"
        self._server_file = server_file
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._reused = False
        self.server_url = ""
        self._use(server_url)

    def get_assignment(self, attempt: int) -> Assignment:
        raw = self._call("GET", f"{self._path}/assignment?attempt={attempt}", None)
        return Assignment.from_json(raw)

    def post_events(self, attempt: int, events: Sequence[AgentEvent]) -> EventReply:
        body = {"attempt": attempt, "events": [event.to_json() for event in events]}
        raw = self._call("POST", f"{self._path}/events", json.dumps(body).encode("utf-8"))
        return EventReply.from_json(raw)

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
        self._use(url)
        return True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _use(self, server_url: str) -> None:
        parts = urlsplit(server_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AgentApiError(f"{server_url!r} is not an http(s) URL of a trainops server")
        self.close()
        self.server_url = server_url.rstrip("/")
        self._scheme, self._netloc, self._base = parts.scheme, parts.netloc, parts.path.rstrip("/")

    def _call(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        try:
            return self._exchange(method, path, body)
        except _STALE:
            if not self._reused:
                return self._fail(method, path, "connection closed")
            self.close()  # the server closed the idle keep-alive connection: try a fresh one
        except (OSError, http.client.HTTPException) as exc:
            return self._fail(method, path, str(exc) or type(exc).__name__)
        try:
            return self._exchange(method, path, body)
        except (OSError, http.client.HTTPException) as exc:
            return self._fail(method, path, str(exc) or type(exc).__name__)

    def _exchange(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        conn = self._connection()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, self._base + path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            self.close()
        if response.status >= 300:
            detail = data[:300].decode("utf-8", errors="replace")
            raise AgentApiError(
                f"{method} {self.server_url}{path}: HTTP {response.status} {detail}",
                status=response.status,
            )
        try:
            parsed: dict[str, Any] = json.loads(data)
        except ValueError:
            raise AgentApiError(f"{method} {self.server_url}{path}: reply is not JSON") from None
        return parsed

    def _connection(self) -> http.client.HTTPConnection:
        self._reused = self._conn is not None
        if self._conn is None:
            factory = (
                http.client.HTTPSConnection
                if self._scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = factory(self._netloc, timeout=self._timeout)
        return self._conn

    def _fail(self, method: str, path: str, why: str) -> dict[str, Any]:
        self.close()
        raise AgentApiError(f"{method} {self.server_url}{path}: cannot reach the server ({why})")


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
