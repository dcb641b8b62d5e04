"""What a running control plane leaves in ``TRAINOPS_HOME`` for its clients: lock, address, token.

A running server holds a ``flock`` on ``server.lock`` (see trainops/server/_server_file.py);
``server.json`` says where it can be reached (``{"url", "pid"}``); ``token`` holds
the home's API token, which every server of the home requires (unless ``TRAINOPS_TOKEN`` sets
another) and which the CLI and SDK of the same user read, as Jupyter's clients do. Both files are
readable by their owner only, and so are the home and its ``jobs/`` folder (:func:`make_private`):
they hold the database, the default object store and every job's tree. This module stays
light: every CLI command reads these files.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from trainops._errors import ConfigError

__all__ = [
    "LOCK_FILE",
    "TOKEN_FILE",
    "home_token",
    "is_loopback_name",
    "lock_is_held",
    "make_private",
    "read_server_file",
    "same_server",
    "token_for",
    "write_private",
]

LOCK_FILE = "server.lock"
TOKEN_FILE = "token"  # noqa: S105 (a file name, not a password)
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def read_server_file(home: Path) -> dict[str, Any] | None:
    """The home's ``server.json``, or ``None`` when it is missing or unreadable."""
    try:
        data = json.loads((home / "server.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def make_private(*folders: Path) -> None:
    """Make each of ``folders`` (and its missing parents) and leave it to its owner only (0700):
    one that exists more open is tightened, as ``ssh`` asks of ``~/.ssh``."""
    for folder in folders:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = folder.stat().st_mode & 0o777
        if mode & 0o077:
            try:
                folder.chmod(0o700)
            except OSError as exc:
                raise ConfigError(
                    f"{folder} is open to other users (mode {mode:o}) and cannot be made "
                    f"private ({exc.strerror}): chmod 700 {folder}, or use another home"
                ) from None


def lock_is_held(home: Path) -> bool:
    """True while a server of ``home`` holds its lock (a probe: takes it shared for a moment)."""
    try:
        fd = os.open(home / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def home_token(home: Path, *, create: bool = False) -> str | None:
    """The home's API token; with ``create`` (a server), a new random one is written first if
    there is none, and a token that is empty or readable by others is refused (:class:`ConfigError`).

    Creation is atomic (a fully written private file is linked into place, never overwritten), so
    two servers starting at once agree on one token.
    """
    path = home / TOKEN_FILE
    token = _read_token(path)
    if not create:
        return token
    if token is None:
        _write_token(home, path)
        token = _read_token(path)
    _check_private(path, token)
    return token


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by its owner only from the first byte
    (it holds a secret): a temporary file of mode 0600 renamed into place."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_token(home: Path, path: Path) -> None:
    import secrets  # only a server makes tokens; every command imports this module

    make_private(home)
    tmp = path.with_name(f".{TOKEN_FILE}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink()


def _check_private(path: Path, token: str | None) -> None:
    """A server refuses a token that is empty or that other users can read."""
    if token is None:
        raise ConfigError(f"{path} holds no API token: remove it and a new one is made")
    info = path.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(
            f"{path} must be private to its owner (it is mode {info.st_mode & 0o777:o}): "
            f"chmod 600 {path}, or remove it and a new one is made"
        )


def _read_token(path: Path) -> str | None:
    try:
        token = path.read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def is_loopback_name(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ``::1``); not names like ``127.x.com``."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same_server(url: str, advertised: str) -> bool:
    """True if ``url`` reaches the server advertised at ``advertised`` (loopback names are one)."""
    a, b = urlsplit(url), urlsplit(advertised)
    try:
        if a.port != b.port:
            return False
    except ValueError:
        return False
    ha, hb = (a.hostname or "").lower(), (b.hostname or "").lower()
    return ha == hb or (is_loopback_name(ha) and is_loopback_name(hb))


def token_for(url: str, home: Path, configured: str | None) -> str | None:
    """The token to send to ``url``: the configured one, else the home's if ``url`` is its server.

    The home token never travels to a server of another home (or another machine).
    """
    if configured:
        return configured
    advertised = read_server_file(home)
    advertised_url = advertised.get("url") if advertised else None
    if isinstance(advertised_url, str) and same_server(url, advertised_url):
        return home_token(home)
    return None
