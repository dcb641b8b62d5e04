"""Reaching a control plane: the configured server, the home's running one, or an embedded one.

One control plane serves a ``TRAINOPS_HOME`` at a time (it holds the home's lock), so every
command reaches the same one: with ``TRAINOPS_SERVER`` (or ``server:`` in config.yaml) set,
:func:`connect` talks to that server; otherwise it attaches to the server already running for
the home (``trainops server``, or another command's embedded one) and only when there is none
starts an embedded server on an ephemeral loopback port for as long as the ``with`` block lasts.
``client.embedded`` tells the caller which it got. The API token is picked up without any user
action: the configured ``TRAINOPS_TOKEN``, else the home's token file for the home's own server.
A server that cannot be reached is an error that ends with what to do about it (start the
configured server, correct or drop the setting that names it, or start the home's again).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from trainops._errors import ServerError
from trainops._home import lock_is_held, read_server_file, token_for
from trainops._settings import Settings
from trainops.client._http import Client

__all__ = ["connect", "running_server"]

PROBE_TIMEOUT_S = 2.0
DEFAULT_PORT = 8470  # `trainops server`'s (the client cannot import the CLI's parser)
HOME_SERVER_FIX = (
    "this home's server stopped answering: start it again with `trainops server`, or run the "
    "command again to use an embedded one"
)
ADVERTISE_WAIT_S = 60.0


@contextmanager
def connect(
    settings: Settings | None = None, *, before_embedded: Callable[[], object] | None = None
) -> Iterator[Client]:
    """Yield a :class:`Client` to the configured server, the home's server, or an embedded one.

    ``before_embedded`` runs before an embedded server is started (it creates the home): a
    caller that leaves checks to the server does them there instead, so that a request bound to
    fail leaves nothing behind.
    """
    settings = settings or Settings.load()
    if settings.server_url:
        with _client(settings.server_url, settings, _configured_fix(settings)) as client:
            yield client
        return
    url = running_server(settings)
    if url:
        with _client(url, settings, HOME_SERVER_FIX) as client:
            yield client
        return
    with _embedded(settings, before_embedded) as client:
        yield client


@contextmanager
def _embedded(settings: Settings, before_embedded: Callable[[], object] | None) -> Iterator[Client]:
    # Imported here: the server (Starlette, uvicorn, the control plane) is only needed when embedded.
    from trainops.backends import backend_for

    # The backend's spare agent starts first: it imports (in a process of its own, on another
    # core where there is one) while this process checks the spec and starts the server, so it
    # is ready for the job. It touches nothing in the home until it is given a job.
    backend = backend_for(settings)
    backend.open()
    try:
        if before_embedded is not None:
            before_embedded()
        from trainops.server import EmbeddedServer, HomeInUseError

        server = EmbeddedServer(settings, backend=backend)
        try:
            server.start()
        except HomeInUseError as busy:
            # Another command's server won the home between our look and our start: use it.
            if busy.url is None:
                raise
            backend.close()
            with _client(busy.url, settings, HOME_SERVER_FIX) as client:
                yield client
            return
    except BaseException:
        backend.close()  # the server that would have owned it never started
        raise
    try:
        with Client(server.url, server.token, embedded=True) as client:
            client.ui_link = server.ui_link
            yield client
    finally:
        server.stop()  # closes the backend too


def running_server(settings: Settings) -> str | None:
    """The URL in ``server.json`` if the home's server (holding the home's lock) answers there."""
    if not lock_is_held(settings.home):
        return None  # no server of this home runs; a server.json left behind is stale
    advertised = read_server_file(settings.home)
    url = advertised.get("url") if advertised else None
    if not isinstance(url, str) or not url:
        return None
    try:
        with Client(url, timeout=PROBE_TIMEOUT_S) as probe:
            probe.health()
    except ServerError:
        return None
    return url


def _configured_fix(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """What to do when the configured server (``TRAINOPS_SERVER`` or ``server:`` in
    config.yaml) cannot be reached: start it there, or stop naming it."""
    env = os.environ if environ is None else environ
    if env.get("TRAINOPS_SERVER"):
        where, undo = "TRAINOPS_SERVER", "unset it"
    else:
        where, undo = f"server: in {settings.home / 'config.yaml'}", "remove it"
    return (
        f"start a server there ({_start_command(settings.server_url or '')}), correct {where}, "
        f"or {undo} to use this home's own server (or an embedded one)"
    )


def _start_command(url: str) -> str:
    """The ``trainops server`` command that would serve ``url``."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "`trainops server`"
    command = "trainops server"
    if host and host not in ("127.0.0.1", "localhost"):
        command += f" --host {host}"
    if port and port != DEFAULT_PORT:
        command += f" --port {port}"
    return f"`{command}`"


def _client(url: str, settings: Settings, fix: str) -> Client:
    if not settings.token:
        _await_advertisement(settings.home)
    return Client(url, token_for(url, settings.home, settings.token), fix=fix)


def _await_advertisement(home: Path) -> None:
    """While the home's server is starting (it holds the home's lock but has not written
    ``server.json`` yet: its backend may take seconds to open, as a Ray cluster's does), wait
    for it to advertise its URL, which decides whether the home's token may be sent."""
    deadline = time.monotonic() + ADVERTISE_WAIT_S
    while read_server_file(home) is None and lock_is_held(home):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
