"""One control plane per ``TRAINOPS_HOME``: the home lock and ``server.json``.

A server holds an exclusive ``flock`` on ``$TRAINOPS_HOME/server.lock`` for its whole life (the
kernel drops it when the process dies, so there is nothing stale to clean up); a second server
on the same home fails to take it and is told where the first one serves. ``server.json``
advertises the URL: clients attach to it and agents re-read it to find a restarted server.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from typing import Any

from trainops._errors import ServerError
from trainops._home import LOCK_FILE, lock_is_held, make_private
from trainops._home import read_server_file as _read_home_server_file
from trainops._settings import Settings

__all__ = [
    "HomeInUseError",
    "HomeLock",
    "advertise",
    "read_server_file",
    "wait_for_advertised_url",
    "withdraw",
]

# How long a server that lost the lock waits for the winner to advertise its URL.
_ADVERTISE_WAIT_S = 15.0
_ADVERTISE_POLL_S = 0.02
_LOCK_TRIES = 25  # 0.5 s: probes hold it for microseconds; a server holds it for good


class HomeInUseError(ServerError):
    """Another control plane holds the home's lock; ``url`` is where it serves (if known)."""

    def __init__(self, settings: Settings, url: str | None) -> None:
        self.url = url
        where = url or "an address it has not advertised yet"
        super().__init__(f"a trainops server already serves {settings.home} at {where}")


def read_server_file(settings: Settings) -> dict[str, Any] | None:
    return _read_home_server_file(settings.home)


class HomeLock:
    """The exclusive lock of one home, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`HomeInUseError` naming the server that holds it."""
        path = self.settings.home / LOCK_FILE
        # The home holds the database, the objects and every job's tree: its owner's only.
        make_private(self.settings.home, self.settings.jobs_dir)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        # A client probing whether the lock is held takes it shared for a moment: retry briefly.
        for _ in range(_LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(_ADVERTISE_POLL_S)
                continue
            self._fd = fd
            return
        os.close(fd)
        raise HomeInUseError(self.settings, wait_for_advertised_url(self.settings))

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def wait_for_advertised_url(settings: Settings, timeout: float = _ADVERTISE_WAIT_S) -> str | None:
    """The URL in ``server.json`` once the home's (starting) server has written it."""
    deadline = time.monotonic() + timeout
    while True:
        data = read_server_file(settings)
        url = data.get("url") if data else None
        if isinstance(url, str) and url and lock_is_held(settings.home):
            return url
        if time.monotonic() > deadline or not lock_is_held(settings.home):
            return None
        time.sleep(_ADVERTISE_POLL_S)


def advertise(settings: Settings, url: str) -> None:
    """Write ``{"url", "pid"}`` atomically (readers see the old file or the new one)."""
    path = settings.server_file
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps({"url": url, "pid": os.getpid()}), encoding="utf-8")
    os.replace(tmp, path)


def withdraw(settings: Settings, url: str) -> None:
    """Remove the file, but only if it still advertises this process and ``url``."""
    data = read_server_file(settings)
    if data is not None and data.get("pid") == os.getpid() and data.get("url") == url:
        with contextlib.suppress(FileNotFoundError):
            settings.server_file.unlink()
