"""Who may use the web UI: one-time login links, session cookies and CSRF tokens.

A browser signs in once and then holds a session cookie (HttpOnly, SameSite=Strict, Path=/,
no Domain: only this host gets it; its name carries a digest of the server's token, so two
servers on one host keep theirs apart). It signs in either with a one-time login link (what a
loopback server prints: a random token, good once and for ``LINK_TTL_S``) or with the API token
typed into the login form (off loopback). Each session has its own CSRF token, which every
state-changing form carries; an action also needs its request's Origin to be this server's.
Sessions live in the server's memory: a restarted server asks again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from trainops.server._http import token_matches

__all__ = ["LINK_TTL_S", "SESSION_TTL_S", "Session", "UiAuth", "csrf_matches"]

LINK_TTL_S = 600.0
SESSION_TTL_S = 12 * 3600.0
_MAX_LINKS = 64
_MAX_SESSIONS = 1024


@dataclass(frozen=True)
class Session:
    key: str
    csrf: str
    expires: float


class UiAuth:
    """The login links and sessions of one server. ``token`` is its API token (``None``: the
    server has none, and every browser is given a session without signing in, like the API)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        digest = hashlib.sha256((token or "open").encode()).hexdigest()[:12]
        self.cookie = f"trainops_ui_{digest}"
        self._links: OrderedDict[str, float] = OrderedDict()
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        """Whether no sign-in is needed (a server without a token)."""
        return not self.token

    def login_link(self, base_url: str) -> str:
        """A new one-time login link to ``base_url``'s UI (good once, for ``LINK_TTL_S``)."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._links[_digest(code)] = time.monotonic() + LINK_TTL_S
            while len(self._links) > _MAX_LINKS:
                self._links.popitem(last=False)
        return f"{base_url.rstrip('/')}/ui/login?code={code}"

    def redeem(self, code: str) -> Session | None:
        """A new session for a login link's ``code``, which is then spent; ``None`` for a code
        that is unknown, spent or expired."""
        with self._lock:
            expires = self._links.pop(_digest(code), None)
        if expires is None or expires < time.monotonic():
            return None
        return self.new_session()

    def sign_in(self, token: str) -> Session | None:
        """A new session for the API token, ``None`` for a wrong one."""
        if self.token and not token_matches(token, self.token):
            return None
        return self.new_session()

    def new_session(self) -> Session:
        session = Session(
            secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time() + SESSION_TTL_S
        )
        with self._lock:
            self._sessions[_digest(session.key)] = session
            while len(self._sessions) > _MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def session(self, cookies: dict[str, str]) -> Session | None:
        """The live session the request's cookie names, if any."""
        key = cookies.get(self.cookie)
        if not key:
            return None
        with self._lock:
            session = self._sessions.get(_digest(key))
        if session is None or not hmac.compare_digest(session.key, key):
            return None
        return session if session.expires > time.time() else None

    def sign_out(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(_digest(session.key), None)

    def cookie_header(self, session: Session | None) -> str:
        """The ``Set-Cookie`` value that holds ``session`` (or clears the cookie for ``None``)."""
        value, age = (session.key, int(SESSION_TTL_S)) if session else ("", 0)
        return f"{self.cookie}={value}; Max-Age={age}; Path=/; HttpOnly; SameSite=Strict"


def csrf_matches(session: Session, given: str) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf.encode(), given.encode())


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()
