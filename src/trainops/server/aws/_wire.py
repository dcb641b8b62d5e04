"""The ASGI layer that takes AWS-shaped requests off the server's port.

A request carrying ``X-Amz-Target`` or a SigV4 ``Authorization`` header is an AWS request; every
other request goes on to trainops' own REST API untouched. An AWS request is routed by the
service name in its signature's credential scope (as moto does), and answered in this order:
the signature's presence and form, the credential (key id, scope, date: headers only, so a
stranger's request costs no body), the operation (``X-Amz-Target``; a query-protocol service's
``Action`` is in the body, so it is found after the signature), the body (refused before
reading when its Content-Length is over the bound), the signature itself over the body, the
body's parse, the model's constraints, and only then the handler (on a worker thread). Each
service's answers and refusals are encoded in its own protocol (``_protocols.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from trainops.server.aws._errors import AwsError, error_response, request_id
from trainops.server.aws._protocols import WireProtocol
from trainops.server.aws._services import AwsOperation, AwsService
from trainops.server.aws._shapes import to_wire
from trainops.server.aws._sigv4 import SignedRequest, Verifier, parse_signature
from trainops.server.aws._validation import validate

__all__ = ["MAX_AWS_BODY", "AwsWire", "is_aws_request"]

MAX_AWS_BODY = 2 * 1024 * 1024  # bytes; CreateTrainingJob's largest legal body is far less


def is_aws_request(headers: Mapping[str, str]) -> bool:
    return "x-amz-target" in headers or headers.get("authorization", "").startswith("AWS4-")


class AwsWire:
    """ASGI middleware answering the registered AWS services; the rest goes on to ``app``."""

    def __init__(
        self, app: ASGIApp, services: Callable[[], list[AwsService]], verifier: Verifier
    ) -> None:
        self.app = app
        self._make_services = services
        self._services: dict[str, AwsService] | None = None
        self.verifier = verifier

    async def services(self) -> dict[str, AwsService]:
        """The registered services, built on the first AWS request (botocore loads then)."""
        if self._services is None:
            try:
                built = await anyio.to_thread.run_sync(self._make_services)
            except ImportError:
                raise AwsError(
                    500,
                    "InternalFailure",
                    "this trainops server has no botocore, which its AWS API needs: "
                    "pip install 'trainops[aws]'",
                ) from None
            self._services = {service.signing_name: service for service in built}
        return self._services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if not is_aws_request(headers):
            await self.app(scope, receive, send)
            return
        rid = request_id()
        try:
            response = await self._answer(Request(scope, receive), headers, rid)
        except AwsError as exc:
            response = error_response(exc, rid)
        await response(scope, receive, send)

    async def _answer(self, request: Request, headers: dict[str, str], rid: str) -> Response:
        signed = parse_signature(headers)
        service = await self._service(signed)
        protocol = service.protocol
        try:
            return await self._answer_in(protocol, service, signed, request, headers, rid)
        except AwsError as exc:
            return protocol.error(exc, rid)

    async def _answer_in(
        self,
        protocol: WireProtocol,
        service: AwsService,
        signed: SignedRequest,
        request: Request,
        headers: dict[str, str],
        rid: str,
    ) -> Response:
        self.verifier.check_credential(signed, headers, datetime.now(UTC))
        path = request.url.path
        named = protocol.target(headers, path)
        operation = _operation(service, named, request.method) if named is not None else None
        body = await _read_body(request, headers)
        raw_path = request.scope.get("raw_path") or path.encode()
        query = request.scope.get("query_string", b"").decode("latin-1")
        self.verifier.verify(
            signed, (request.method, raw_path.decode("latin-1"), query), headers, body
        )
        in_body, data = protocol.parse(body)
        if operation is None:
            operation = _operation(service, f"{service.target_prefix}.{in_body}", request.method)
        model = service.operation_model(operation.name)
        validate(data, model.input_shape)
        answer = await anyio.to_thread.run_sync(operation.handler, data)
        shaped = to_wire(answer, model.output_shape) if model.output_shape is not None else {}
        return protocol.answer(shaped, model, rid)

    async def _service(self, signed: SignedRequest) -> AwsService:
        services = await self.services()
        service = services.get(signed.service)
        if service is None:
            raise AwsError(
                403,
                "InvalidSignatureException",
                f"Credential should be scoped to correct service: '{signed.service[:40]}'. "
                f"This server answers: {', '.join(sorted(services))}.",
            )
        return service


def _headers(scope: Scope) -> dict[str, str]:
    """Lower-cased names; a repeated header's values joined with commas (as SigV4 signs them)."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


def _operation(service: AwsService, target: str, method: str) -> AwsOperation:
    prefix, _, name = target.partition(".")
    operation = service.operations.get(name) if prefix == service.target_prefix else None
    if operation is None or method != "POST":
        raise AwsError(400, "UnknownOperationException", f"Unknown operation {target[:120]!r}")
    return operation


async def _read_body(request: Request, headers: Mapping[str, str]) -> bytes:
    declared = headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_AWS_BODY:
        raise _too_large()
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > MAX_AWS_BODY:
            raise _too_large()
    return bytes(body)


def _too_large() -> AwsError:
    return AwsError(
        413, "RequestEntityTooLargeException", f"Request body is larger than {MAX_AWS_BODY} bytes"
    )
