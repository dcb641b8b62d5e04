"""The Host and Origin checks every request passes before any route sees it (DNS rebinding).

A web page on an attacker's domain whose name is rebound to 127.0.0.1 reaches a loopback server
with ``Host: attacker.example`` (and, from a browser, ``Origin: http://attacker.example``). So a
request is only served when its Host names this server: a loopback name, the address it is bound
to (for a wildcard bind, this machine's names and addresses) or a name in ``allowed_hosts``; and
when it carries an Origin, that origin must be the server's own (the ``/docs`` page). The API
token is the second wall; this one also covers ``/health`` and the OpenAPI document.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import psutil
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostGuard", "allowed_host_names"]

_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 (names to compare with, not to bind)
ANY_HOST = "*"


def allowed_host_names(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names (lower case, no port or brackets) a server bound to ``bind_host`` accepts."""
    names = {*_LOOPBACK, _bare(bind_host), *(_bare(h) for h in extra)}
    if bind_host in _WILDCARDS:
        names |= {_bare(socket.gethostname()), _bare(socket.getfqdn())}
        for addresses in psutil.net_if_addrs().values():
            names |= {_bare(a.address.split("%")[0]) for a in addresses if a.family in _INET}
    names.discard("")
    return frozenset(names)


_INET = (socket.AF_INET, socket.AF_INET6)


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def host_name(header: str) -> str:
    """The name part of a Host header (``[::1]:8470`` -> ``::1``, ``Example:80`` -> ``example``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostGuard:
    """ASGI middleware answering 403 to a request whose Host or Origin is not this server's."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self.problem(dict(scope["headers"]))
        if problem is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": {"error": "forbidden", "message": problem}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def problem(self, headers: dict[bytes, bytes]) -> str | None:
        """Why the request is refused, or ``None`` when its Host and Origin are acceptable."""
        host = headers.get(b"host", b"").decode("latin-1")
        if ANY_HOST not in self.allowed and host_name(host) not in self.allowed:
            return (
                f"Host {host!r} is not a name of this trainops server (a DNS-rebinding guard); "
                "if it is one, add it to allowed_hosts in $TRAINOPS_HOME/config.yaml "
                "(or TRAINOPS_ALLOWED_HOSTS)"
            )
        origin = headers.get(b"origin")
        if origin is not None and not _same_origin(origin.decode("latin-1"), host):
            return (
                f"Origin {origin.decode('latin-1')!r} is not this server's: "
                "pages of other sites may not call the trainops API"
            )
        return None


def _same_origin(origin: str, host: str) -> bool:
    try:
        parts = urlsplit(origin.strip())
    except ValueError:  # e.g. "http://[::1": not an origin at all
        return False
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower()
