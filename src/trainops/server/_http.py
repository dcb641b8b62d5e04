"""Small HTTP pieces shared by the routes: the error type, JSON answers and bearer-token checks.

Every error answer is ``{"detail": {"error": kind, "message": text, ...}}`` (docs/api.md);
:func:`error_answer` maps trainops' own exceptions to one, so the routes raise them freely.
"""

from __future__ import annotations

import hmac
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.responses import Response

from trainops._errors import JobNotFoundError, SpecError, TrainopsError
from trainops.control import AgentAuthError, JobEndedError
from trainops.store import JobExistsError

__all__ = [
    "ApiError",
    "JsonAnswer",
    "bearer_token",
    "error",
    "error_answer",
    "token_matches",
]

KIND_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
}


class ApiError(Exception):
    """An error answer: HTTP status, error kind and message (plus extra detail keys)."""

    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.extra = status, error, message, extra


class JsonAnswer(Response):
    """A JSON answer, compact; a lone surrogate in a string (from a JSON body's ``\\ud800``)
    is written back as its escape instead of failing the answer."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")


def error(
    status: int,
    kind: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JsonAnswer:
    """An error answer; a 401 says which scheme it wants (``WWW-Authenticate: Bearer``)."""
    merged = dict(headers or {})
    if status == 401:
        merged["WWW-Authenticate"] = "Bearer"
    detail = {"error": kind, "message": message, **extra}
    return JsonAnswer({"detail": detail}, status_code=status, headers=merged or None)


def error_answer(exc: BaseException, store_path: Path) -> JsonAnswer | None:
    """The answer to an exception a route raised, or ``None`` for one that is a server bug."""
    if isinstance(exc, ApiError):
        return error(exc.status, exc.error, exc.message, **exc.extra)
    if isinstance(exc, SpecError):
        problems = [[path, reason] for path, reason in exc.problems]
        return error(422, "invalid_spec", str(exc), problems=problems)
    if isinstance(exc, JobNotFoundError):
        return error(404, "not_found", str(exc))
    if isinstance(exc, JobExistsError | JobEndedError):
        return error(409, "conflict", str(exc))
    if isinstance(exc, AgentAuthError):
        return error(401, "unauthorized", str(exc))
    if isinstance(exc, TrainopsError):
        return error(400, "bad_request", str(exc))
    if isinstance(exc, sqlite3.OperationalError):
        # Typically "database or disk is full": say so in one line, never a traceback.
        message = f"the metadata store {store_path} cannot be written: {exc}"
        if "full" in str(exc):
            return error(507, "insufficient_storage", message + "; free some space there")
        return error(503, "store_unavailable", message)
    return None


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if there is one."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so response times do not reveal how much of a guess is right."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())
