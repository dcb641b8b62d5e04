"""Small HTTP pieces shared by the routers: the error type and bearer-token checks."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request

__all__ = ["ApiError", "bearer_token", "token_matches"]


class ApiError(Exception):
    """An error answer: HTTP status, error kind and message (plus extra detail keys)."""

    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.extra = status, error, message, extra


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if there is one."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so response times do not reveal how much of a guess is right."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())
