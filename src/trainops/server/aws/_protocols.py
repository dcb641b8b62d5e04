"""The AWS wire protocols a service may speak, each a :class:`WireProtocol`: where the operation's
name is (``X-Amz-Target``, the form's ``Action``, the URL path), how the body is parsed and how
answers and refusals are encoded.

- ``json`` (JSON 1.0 and 1.1: SageMaker, CloudWatch Logs): ``X-Amz-Target``, JSON both ways;
- ``query`` (STS): a form body with ``Action``, an XML answer wrapped as the model's
  ``resultWrapper`` says, XML errors (``ErrorResponse``);

A service's protocol is the one botocore resolves for it (``ServiceModel.resolved_protocol``: the
first of the model's ``protocols`` that botocore supports): CloudWatch metrics' model lists
``smithy-rpc-v2-cbor``, ``json`` and ``query``, and the pinned botocore speaks ``json`` (1.0) to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from starlette.responses import Response

from trainops.server.aws._errors import AwsError, aws_answer, error_response

if TYPE_CHECKING:
    from botocore.model import OperationModel, ServiceModel, Shape

__all__ = ["WireProtocol", "protocol_of"]


class WireProtocol(Protocol):
    """How one protocol finds the operation, reads the body and writes the answer."""

    def target(self, headers: Mapping[str, str], path: str) -> str | None:
        """The operation's name where it is known before the body (else ``None``)."""

    def parse(self, body: bytes) -> tuple[str | None, Any]:
        """The operation's name where the body holds it, and the request's members."""

    def answer(self, value: Any, model: OperationModel, rid: str) -> Response: ...

    def error(self, exc: AwsError, rid: str) -> Response: ...


class JsonProtocol:
    """JSON 1.0/1.1. A service that was a query service once (``awsQueryCompatible``, as
    CloudWatch) also names a refusal by its old query code in ``x-amzn-query-error``, which
    botocore reads to raise the modeled exception (``InvalidParameterCombination``...)."""

    def __init__(self, version: str, query_codes: Mapping[str, str] | None = None) -> None:
        self.version = version
        self.query_codes = dict(query_codes or {})

    def target(self, headers: Mapping[str, str], path: str) -> str | None:
        return headers.get("x-amz-target", "")

    def parse(self, body: bytes) -> tuple[str | None, Any]:
        if not body.strip():
            return None, {}
        try:
            return None, json.loads(body)
        except RecursionError:
            raise _too_deep() from None
        except ValueError as exc:
            raise AwsError(
                400, "SerializationException", f"Request body is not JSON: {exc}"
            ) from None

    def answer(self, value: Any, model: OperationModel, rid: str) -> Response:
        return aws_answer(value or {}, rid, self.version)

    def error(self, exc: AwsError, rid: str) -> Response:
        answer = error_response(exc, rid, self.version)
        if exc.code in self.query_codes:
            fault = "Sender" if exc.status < 500 else "Receiver"
            answer.headers["x-amzn-query-error"] = f"{self.query_codes[exc.code]};{fault}"
        return answer


#: The query services' names of the refusals the JSON services name otherwise.
_QUERY_CODES = {
    "InvalidSignatureException": "SignatureDoesNotMatch",
    "UnrecognizedClientException": "InvalidClientTokenId",
    "MissingAuthenticationTokenException": "MissingAuthenticationToken",
    "IncompleteSignatureException": "IncompleteSignature",
    "UnknownOperationException": "InvalidAction",
    "SerializationException": "MalformedInput",
    "ValidationException": "ValidationError",
}


class QueryProtocol:
    """AWS's query protocol: top-level scalars and lists of scalars (all that STS's and IAM's
    answered operations take)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def target(self, headers: Mapping[str, str], path: str) -> str | None:
        return None

    def parse(self, body: bytes) -> tuple[str | None, Any]:
        try:
            form = dict(parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=100))
        except (UnicodeDecodeError, ValueError):
            raise AwsError(400, "MalformedQueryString", "The request is not a form") from None
        form.pop("Version", None)
        return form.pop("Action", ""), _lists(form)

    def answer(self, value: Any, model: OperationModel, rid: str) -> Response:
        name = model.name
        shape = model.output_shape
        wrapper = shape.serialization.get("resultWrapper") if shape is not None else None
        inner = _xml(value, shape) if shape is not None else ""
        result = f"<{wrapper}>{inner}</{wrapper}>" if wrapper else inner
        text = (
            f'<{name}Response xmlns="{self.namespace}">{result}'
            f"<ResponseMetadata><RequestId>{rid}</RequestId></ResponseMetadata>"
            f"</{name}Response>"
        )
        return Response(text, 200, headers={"x-amzn-RequestId": rid}, media_type="text/xml")

    def error(self, exc: AwsError, rid: str) -> Response:
        kind = "Sender" if exc.status < 500 else "Receiver"
        code = _QUERY_CODES.get(exc.code, exc.code)
        text = (
            f'<ErrorResponse xmlns="{self.namespace}"><Error><Type>{kind}</Type>'
            f"<Code>{escape(code)}</Code><Message>{escape(exc.message)}</Message></Error>"
            f"<RequestId>{rid}</RequestId></ErrorResponse>"
        )
        return Response(text, exc.status, headers={"x-amzn-RequestId": rid}, media_type="text/xml")


_LIST_ITEM = re.compile(r"([A-Za-z][A-Za-z0-9]*)\.member\.([1-9][0-9]{0,2})")


def _lists(form: dict[str, str]) -> dict[str, Any]:
    """The form's top-level lists of scalars (``Names.member.1=a&Names.member.2=b``) as lists,
    in their numbers' order; a list with a gap in its numbers is refused."""
    found: dict[str, Any] = {}
    items: dict[str, dict[int, str]] = {}
    for key, value in form.items():
        item = _LIST_ITEM.fullmatch(key)
        if item is None:
            found[key] = value
        else:
            items.setdefault(item.group(1), {})[int(item.group(2))] = value
    for name, numbered in items.items():
        if sorted(numbered) != list(range(1, len(numbered) + 1)):
            raise AwsError(400, "MalformedQueryString", f"{name}: list items are not 1..n")
        found[name] = [numbered[n] for n in sorted(numbered)]
    return found


def _xml(value: Any, shape: Shape) -> str:
    """``value`` (already shaped by ``to_wire``) as the query protocol's XML members."""
    kind = shape.type_name
    if kind == "structure":
        return "".join(
            f"<{name}>{_xml(value[name], member)}</{name}>"
            for name, member in shape.members.items()
            if name in value
        )
    if kind == "list":
        return "".join(f"<member>{_xml(item, shape.member)}</member>" for item in value)
    if kind == "boolean":
        return "true" if value else "false"
    return escape(str(value))


def _too_deep() -> AwsError:
    return AwsError(400, "SerializationException", "Request body is nested too deeply")


def protocol_of(model: ServiceModel) -> WireProtocol:
    """The protocol botocore speaks to the service of ``model``."""
    name = model.resolved_protocol
    if name == "json":
        codes = {}
        if "awsQueryCompatible" in model.metadata:
            errors = [(e.name, e.metadata.get("error") or {}) for e in model.error_shapes]
            codes = {name: error["code"] for name, error in errors if "code" in error}
        return JsonProtocol(str(model.metadata.get("jsonVersion", "1.1")), codes)
    if name == "query":
        return QueryProtocol(str(model.metadata.get("xmlNamespace", "")))
    raise ValueError(f"{model.service_name} speaks {name}, which this server does not answer")
