"""AWS's JSON 1.1 error answers: ``{"__type": code, "message": text}`` with the request id and
error type headers botocore reads (``x-amzn-RequestId``, ``x-amzn-ErrorType``)."""

from __future__ import annotations

import json
import uuid

from starlette.responses import Response

__all__ = ["AwsError", "aws_answer", "error_response", "request_id"]

JSON_11 = "application/x-amz-json-1.1"


class AwsError(Exception):
    """A refusal in the service's words: HTTP status, error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def request_id() -> str:
    return str(uuid.uuid4())


def aws_answer(body: object, rid: str) -> Response:
    """A JSON 1.1 success answer."""
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(data, 200, headers={"x-amzn-RequestId": rid}, media_type=JSON_11)


def error_response(exc: AwsError, rid: str) -> Response:
    """``exc`` as the service answers it."""
    data = json.dumps({"__type": exc.code, "message": exc.message}).encode()
    headers = {"x-amzn-RequestId": rid, "x-amzn-ErrorType": f"{exc.code}:"}
    return Response(data, exc.status, headers=headers, media_type=JSON_11)
