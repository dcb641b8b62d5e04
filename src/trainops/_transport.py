"""The one keep-alive HTTP/1.1 transport, over the standard library's ``http.client``.

Both the CLI/SDK client and the host agent speak HTTP through this. Every command and every agent
pays for its imports, and httpx alone costs more than a whole warm request round trip, so neither
uses it. One connection is kept open per transport. When a *reused* connection turns out to have
been closed by the server while it sat idle, the request is sent once more on a fresh connection;
a fresh connection that fails is reported at once (the server is down, retrying only hides it).
Callers must only send requests that are safe to repeat that way (every call of trainops' APIs is:
agent events carry sequence numbers, submissions carry the job name).
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

__all__ = ["HttpResponse", "HttpTransport", "TransportError", "TransportTimeout"]

_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class TransportError(Exception):
    """The request did not get an answer (refused, reset, DNS)."""


class TransportTimeout(TransportError):
    """The server did not answer within the timeout."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    reason: str
    body: bytes
    will_close: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class HttpTransport:
    """Requests against one base URL; ``headers`` go on every request."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        self._headers = {"Accept": "application/json", "Connection": "keep-alive", **headers}
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self.base_url = ""
        self.rebase(base_url)

    def rebase(self, base_url: str) -> None:
        """Send the next requests to ``base_url`` (a server that moved); raises ``ValueError``."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// URL")
        self.close()
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, Any]] | None = None,
        body: Any = None,
        raw: bytes | None = None,
        timeout: float | None = None,
    ) -> HttpResponse:
        """Send one request; ``body`` is sent as JSON, ``raw`` as ready JSON bytes."""
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        payload = raw if raw is not None else None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if payload is not None:
            headers["Content-Type"] = "application/json"
        reused = self._conn is not None and self._conn.sock is not None
        try:
            return self._send(method, target, payload, headers, timeout)
        except _STALE as exc:
            if not reused:
                raise TransportError(str(exc) or type(exc).__name__) from None
        except TimeoutError:
            raise TransportTimeout("timed out") from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(str(exc) or type(exc).__name__) from None
        # The server closed the idle keep-alive connection: once more on a fresh one.
        try:
            return self._send(method, target, payload, headers, timeout)
        except TimeoutError:
            raise TransportTimeout("timed out") from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(str(exc) or type(exc).__name__) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _send(
        self,
        method: str,
        target: str,
        payload: bytes | None,
        headers: dict[str, str],
        timeout: float | None,
    ) -> HttpResponse:
        try:
            conn = self._connection(timeout)
            conn.request(method, target, body=payload, headers=headers)
            reply = conn.getresponse()
            response = HttpResponse(reply.status, reply.reason, reply.read(), reply.will_close)
        except BaseException:
            # Whatever interrupted the exchange (an error, Ctrl-C during a long-poll) leaves the
            # connection mid-response: drop it so the next request starts clean.
            self.close()
            raise
        if response.will_close:
            self.close()
        return response

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        conn = self._conn
        if conn.sock is None:
            # New, or closed by a "Connection: close" answer: (re)connect before setting options.
            conn.connect()
        sock: socket.socket = conn.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout if timeout is not None else self._timeout)
        return conn
