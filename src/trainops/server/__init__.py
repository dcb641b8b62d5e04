"""The control plane's HTTP server: the public REST API and the agent API (FastAPI + uvicorn).

:func:`create_app` builds the ASGI app around a :class:`~trainops.control.JobController`;
:func:`serve` runs a long-lived server (``trainops server``); :class:`EmbeddedServer` runs one on
an ephemeral loopback port for as long as a ``with`` block lasts (``trainops run``). Either holds
the home's lock while it runs (:class:`HomeInUseError` for a second one) and requires the home's
API token on the public API.
"""

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
