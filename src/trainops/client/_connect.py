"""Reaching a control plane: the configured server, or an embedded one for this process.

With ``TRAINOPS_SERVER`` (or ``server:`` in config.yaml) set, :func:`connect` talks to that
server. Otherwise it starts an embedded server on an ephemeral loopback port for as long as the
``with`` block lasts; ``client.embedded`` tells the caller which of the two it got. Only one
control plane may run per ``TRAINOPS_HOME``, so ``attach=True`` (for commands that only read or
stop jobs) first looks for a live server advertised in ``server.json`` and uses it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from trainops._errors import ServerError
from trainops._settings import Settings
from trainops.client._http import Client

__all__ = ["connect"]

PROBE_TIMEOUT_S = 2.0


@contextmanager
def connect(settings: Settings | None = None, *, attach: bool = False) -> Iterator[Client]:
    """Yield a :class:`Client` to the configured server, or to an embedded one started here.

    With ``attach``, a server already running for this home (another command's embedded one or
    ``trainops server``) is used when no server is configured.
    """
    settings = settings or Settings.load()
    url = settings.server_url or (_running_server(settings) if attach else None)
    if url:
        with Client(url, settings.token) as client:
            yield client
        return
    # Imported here: the server (FastAPI, uvicorn, the control plane) is only needed when embedded.
    from trainops.server import EmbeddedServer

    with (
        EmbeddedServer(settings) as server,
        Client(server.url, settings.token, embedded=True) as client,
    ):
        yield client


def _running_server(settings: Settings) -> str | None:
    """The URL in ``server.json`` if a trainops server answers there."""
    from trainops.server import read_server_file

    advertised = read_server_file(settings)
    url = advertised.get("url") if advertised else None
    if not isinstance(url, str) or not url:
        return None
    try:
        with Client(url, settings.token, timeout=PROBE_TIMEOUT_S) as probe:
            probe.health()
    except ServerError:
        return None
    return url
