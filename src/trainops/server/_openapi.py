"""The OpenAPI 3.1 document and the ``/docs`` pages, written from the route table.

Imported on the first ``GET /openapi.json`` (or ``/docs``), never at start-up: a server started
for one ``trainops run`` has no use for them. Every operation's parameters, body, success answer
and error answers come from its :class:`~trainops.server._routing.Operation`, the declaration
that also parses its requests; the component schemas are pydantic's.
"""

from __future__ import annotations

import html
import inspect
import json
import re
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from trainops.server._routing import Operation, Param

__all__ = ["ErrorBody", "openapi_document", "redoc_page", "swagger_page"]

REF = "#/components/schemas/{model}"


class ErrorDetail(BaseModel):
    error: str = Field(description="bad_request, unauthorized, forbidden, not_found, conflict, …")
    message: str
    problems: list[list[str]] | None = Field(
        default=None, description="422 only: [field path, reason] pairs"
    )


class ErrorBody(BaseModel):
    """Every error answer: ``{"detail": {"error", "message", ...}}``."""

    detail: ErrorDetail


WHY = {
    400: "malformed request, or a parameter out of range or unknown",
    401: "missing or wrong token",
    403: "the Host or Origin header is not this server's",
    404: "no such job (or, for a profiler report, no profiler data)",
    409: "a job with that name exists, or the job has already ended",
    413: "the body is larger than this operation takes",
    422: "the spec (or job_name, code_uri) is invalid; problems name each field",
    503: "the metadata store cannot be used (it is locked, damaged or gone)",
    507: "the metadata store cannot be written: the disk under TRAINOPS_HOME is full",
}
_AGENT_WHY = {
    401: "missing or wrong agent token",
    404: "no such remote command",
}
_SUCCESS = {200: "OK", 201: "Created", 202: "Accepted"}

SECURITY_SCHEMES = {
    "token": {
        "type": "http",
        "scheme": "bearer",
        "description": (
            "the server's API token: TRAINOPS_TOKEN, else the one in $TRAINOPS_HOME/token"
        ),
    },
    "agent": {
        "type": "http",
        "scheme": "bearer",
        "description": "the agent token of the host in the path: one per host of one attempt, "
        "revoked once that host or its job has ended",
    },
}


def openapi_document(
    operations: list[Operation], *, title: str, version: str, description: str
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations``."""
    models: dict[type[BaseModel], None] = {ErrorBody: None}
    for op in operations:
        if op.body is not None:
            models[op.body] = None
        if isinstance(op.returns, type):
            models[op.returns] = None
    _, definitions = models_json_schema(
        [(model, "validation") for model in models], ref_template=REF
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    schemas = definitions.get("$defs", {})
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


def _operation(op: Operation) -> dict[str, Any]:
    found: dict[str, Any] = {
        "summary": op.summary or op.name.replace("_", " ").title(),
        "operationId": re.sub(r"\W", "_", f"{op.name}{op.path}") + f"_{op.method.lower()}",
    }
    description = op.description or inspect.getdoc(op.handler)
    if description:
        found["description"] = description
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in op.path_params
    ] + [_parameter(param) for param in op.params]
    if parameters:
        found["parameters"] = parameters
    if op.body is not None:
        found["requestBody"] = {"required": True, "content": _json(_ref(op.body))}
    found["responses"] = _responses(op)
    if op.auth is not None:
        found["security"] = [{op.auth: []}]
    return found


def _parameter(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"} if param.type == "array" else {"type": param.type}
    if param.choices is not None:
        schema["enum"] = list(param.choices)
    if param.type == "array":
        schema = {"type": "array", "items": schema}
    if param.ge is not None:
        schema["minimum"] = param.ge
    if param.le is not None:
        schema["maximum"] = param.le
    if param.default is not None:
        schema["default"] = param.default
    found = {"name": param.name, "in": "query", "required": param.required, "schema": schema}
    if param.description:
        found["description"] = param.description
    return found


def _responses(op: Operation) -> dict[str, Any]:
    if op.returns is None:
        success: dict[str, Any] = {}
    elif isinstance(op.returns, type):
        success = _ref(op.returns)
    else:
        success = dict(op.returns)
    found = {str(op.status): {"description": _SUCCESS[op.status], "content": _json(success)}}
    statuses = {403, *op.errors}
    if op.auth is not None:
        statuses.add(401)
    if op.store:  # any route that reads or writes the store may answer these two
        statuses |= {503, 507}
    if op.body is not None:
        statuses.add(413)
    why = WHY | _AGENT_WHY if op.auth == "agent" else WHY
    for status in sorted(statuses):
        found[str(status)] = {"description": why[status], "content": _json(_ref(ErrorBody))}
    return found


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def swagger_page(title: str, openapi_url: str) -> str:
    """A Swagger UI page (its script and styles from jsDelivr) showing the document."""
    return f"""<!DOCTYPE html>
<html>
<head>
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link type="text/css" rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css">
<title>{html.escape(title)} - Swagger UI</title>
</head>
<body>
<div id="swagger-ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>
const ui = SwaggerUIBundle({{
  url: {json.dumps(openapi_url)},
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
}})
</script>
</body>
</html>
"""


def redoc_page(title: str, openapi_url: str) -> str:
    """A ReDoc page (its script from jsDelivr) showing the document."""
    return f"""<!DOCTYPE html>
<html>
<head>
<title>{html.escape(title)} - ReDoc</title>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body {{ margin: 0; padding: 0; }}</style>
</head>
<body>
<noscript>ReDoc requires Javascript to function. Please enable it to browse the documentation.</noscript>
<redoc spec-url="{html.escape(openapi_url)}"></redoc>
<script src="https://cdn.jsdelivr.net/npm/redoc@2/bundles/redoc.standalone.js"></script>
</body>
</html>
"""
