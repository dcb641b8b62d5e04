"""AWS's JSON 1.1 error answers: ``{"__type": code, "message": text}`` with the request id and
error type headers botocore reads (``x-amzn-RequestId``, ``x-amzn-ErrorType``)."""

from __future__ import annotations

import json
import uuid

from starlette.responses import Response

__all__ = ["AwsError", "aws_answer", "error_response", "request_id"]


def _media(version: str) -> str:
    return f"application/x-amz-json-{version}"


class AwsError(Exception):
    """A refusal in the service's words: HTTP status, error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def request_id() -> str:
    return str(uuid.uuid4())


def aws_answer(body: object, rid: str, version: str = "1.1") -> Response:
    """A JSON (1.1, or ``version``) success answer."""
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(data, 200, headers={"x-amzn-RequestId": rid}, media_type=_media(version))


def error_response(exc: AwsError, rid: str, version: str = "1.1") -> Response:
    """``exc`` as the service answers it."""
    data = json.dumps({"__type": exc.code, "message": exc.message}).encode()
    headers = {"x-amzn-RequestId": rid, "x-amzn-ErrorType": f"{exc.code}:"}
    return Response(data, exc.status, headers=headers, media_type=_media(version))
