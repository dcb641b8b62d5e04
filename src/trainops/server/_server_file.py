"""``$TRAINOPS_HOME/server.json``: where the running control plane of a home can be reached.

Agents re-read it to find a restarted server; a new server refuses to start while another one
is alive on the same home (two controllers would both run the same jobs).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from typing import Any
from urllib.parse import urlsplit

import psutil

from trainops._errors import ServerError
from trainops._settings import Settings

__all__ = ["advertise", "check_no_live_server", "read_server_file", "withdraw"]


def read_server_file(settings: Settings) -> dict[str, Any] | None:
    try:
        data = json.loads(settings.server_file.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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


def check_no_live_server(settings: Settings) -> None:
    """Refuse to start a second control plane for the same home."""
    data = read_server_file(settings)
    if data is None:
        return
    url, pid = str(data.get("url", "")), data.get("pid")
    if isinstance(pid, int) and psutil.pid_exists(pid) and _accepts(url):
        raise ServerError(
            f"a trainops server for {settings.home} is already running at {url} (pid {pid}); "
            f"use it (TRAINOPS_SERVER={url}) or stop it first"
        )


def _accepts(url: str) -> bool:
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return False
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=0.5):
            return True
    except OSError:
        return False
