"""A tiny real HTTP server on 127.0.0.1 that answers with scripted JSON and records requests.

It plays the REST API where a test needs answers the real server does not give on demand
(errors of every kind, a scripted sequence of log pages).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

Reply = tuple[int, Any]


@dataclass
class Request:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedAPI:
    """Routes ``(method, path)`` to replies; a list of replies is served in order, the last repeats."""

    url: str = ""
    routes: dict[tuple[str, str], Reply | list[Reply] | Callable[[Request], Reply]] = field(
        default_factory=dict
    )
    requests: list[Request] = field(default_factory=list)

    def answer(self, request: Request) -> Reply:
        self.requests.append(request)
        route = self.routes.get((request.method, request.path))
        if route is None:
            return 404, {"detail": {"error": "not_found", "message": f"no route {request.path}"}}
        if callable(route):
            return route(request)
        if isinstance(route, list):
            return route.pop(0) if len(route) > 1 else route[0]
        return route


def _handler(api: ScriptedAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=parts.path,
                query=parse_qsl(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            status, body = api.answer(request)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve

    return Handler


@contextmanager
def scripted_api() -> Iterator[ScriptedAPI]:
    """Serve a fresh :class:`ScriptedAPI` on a free loopback port for the ``with`` block."""
    scripted = ScriptedAPI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(scripted))
    scripted.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield scripted
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
