"""The control plane's HTTP server: the public REST API and the agent API (Starlette + uvicorn).

:func:`create_app` builds the ASGI app around a :class:`~trainops.control.JobController`;
:func:`serve` runs a long-lived server (``trainops server``); :class:`EmbeddedServer` runs one on
an ephemeral loopback port for as long as a ``with`` block lasts (``trainops run``). Either holds
the home's lock while it runs (:class:`HomeInUseError` for a second one) and requires the home's
API token on the public API. The same app serves the web UI (``ui``: ``/`` and ``/ui/...``).

Names are imported on first use, and Starlette and uvicorn only once a server starts serving, so
that an embedded server's start-up can overlap with theirs. The OpenAPI document is written from
the route table on its first request, never at start-up.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.server._app import create_app
    from trainops.server._run import EmbeddedServer, serve
    from trainops.server._server_file import HomeInUseError, read_server_file
    from trainops.server._views import describe, redact, summary

__all__ = [
    "EmbeddedServer",
    "HomeInUseError",
    "create_app",
    "describe",
    "read_server_file",
    "redact",
    "serve",
    "summary",
]

_MODULE_OF = {
    "create_app": "trainops.server._app",
    "EmbeddedServer": "trainops.server._run",
    "serve": "trainops.server._run",
    "HomeInUseError": "trainops.server._server_file",
    "read_server_file": "trainops.server._server_file",
    "describe": "trainops.server._views",
    "redact": "trainops.server._views",
    "summary": "trainops.server._views",
}


__getattr__, __dir__ = lazy_names("trainops.server", globals(), _MODULE_OF)
