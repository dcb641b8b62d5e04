"""The OpenAPI document is true: schemathesis calls every operation of a real server on loopback.

Each answer must be documented for its operation (status code, content type, body schema), and
no request, however odd, may make the server fail (5xx). The run is bounded (a few examples per
operation, no example database) so it stays well under a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.control._harness import ControlPlane
from trainops._settings import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 15
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
]


def test_every_answer_is_documented(plane: ControlPlane) -> None:
    # A job to find, so that some generated calls reach a job rather than a 404.
    plane.submit("known", {"FAKE_LINES": "1"})
    plane.wait_ended("known")
    schema = schemathesis.openapi.from_url(f"{plane.server.url}/openapi.json")
    headers = {"Authorization": plane.client.headers["Authorization"]}
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:
        try:
            _exercise(operation, headers)
        except Exception as exc:  # report every operation's failure, not only the first
            failures[operation.label] = str(exc)[:2000]
    assert len(operations) >= 10
    assert failures == {}


def _exercise(operation: Any, headers: dict[str, str]) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS, timeout=40)

    call()


def test_the_cases_the_document_got_wrong(plane: ControlPlane) -> None:
    document = plane.client.get("/openapi.json").json()
    submit = document["paths"]["/api/v1/jobs"]["post"]["responses"]
    assert {"201", "400", "401", "403", "409", "422"} <= set(submit)
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    assert submit["422"]["content"]["application/json"]["schema"] == error_body
    describe = document["paths"]["/api/v1/jobs/{name}"]["get"]["responses"]
    assert "422" not in describe and {"401", "404"} <= set(describe)
    assert "HTTPValidationError" not in str(document)
    # An empty bound is no bound; an empty spec is a 422 naming the missing field.
    assert plane.client.get("/api/v1/jobs", params={"created_after": ""}).status_code == 200
    empty = plane.client.post(
        "/api/v1/jobs", json={"job_name": "e", "spec": {}, "code_uri": plane.code_uri}
    )
    assert empty.status_code == 422
    assert empty.json()["detail"]["problems"] == [["entry_point", "Field required"]]


def test_the_document_is_valid_openapi_3_1(plane: ControlPlane) -> None:
    from schemathesis.specs.openapi.adapter.validators import validate_v3

    document = plane.client.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    validate_v3(document)  # the OpenAPI 3.1 meta-schema; raises on a document that breaks it
    schemes = document["components"]["securitySchemes"]
    assert schemes["token"] == schemes["token"] | {"type": "http", "scheme": "bearer"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = set(operation["responses"])
            # Every other route reads or writes the store (the change stream reads the
            # store's commit counters, in memory).
            if path not in ("/api/v1/health", "/api/v1/events"):
                assert {"503", "507"} <= responses, (method, path)
            security = operation.get("security")
            if path.startswith("/api/v1/") and path != "/api/v1/health":
                assert security == [{"token": []}] and "401" in responses, (method, path)


def test_the_document_lists_exactly_the_routes_served(plane: ControlPlane) -> None:
    from starlette.routing import Route

    http = plane.server._server
    assert http is not None
    served = {
        (method.lower(), route.path)
        for route in http.config.app.routes
        if isinstance(route, Route)
        and route.path not in ("/openapi.json", "/docs", "/redoc")
        and not _web_ui(route.path)  # HTML pages for browsers (docs/ui.md), not the API
        for method in route.methods or ()
    }
    document = plane.client.get("/openapi.json").json()
    documented = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert served == documented


def _web_ui(path: str) -> bool:
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def test_the_documented_bounds_are_the_enforced_ones(plane: ControlPlane) -> None:
    """Every query parameter's documented minimum, maximum and requiredness is what a request
    finds: one past a bound, or a required one left out, is a 400 naming it."""
    document = plane.client.get("/openapi.json").json()
    checked = 0
    for path, operations in document["paths"].items():
        url = path.replace("{", "").replace("}", "")  # /jobs/{name} -> /jobs/name
        for method, operation in operations.items():
            params = [p for p in operation.get("parameters", []) if p["in"] == "query"]
            agent = {"Authorization": "Bearer guess"} if path.startswith("/agent/") else {}
            body = {} if method == "post" else None
            for param in params:
                schema, name = param["schema"], param["name"]
                others = {p["name"]: p["schema"]["minimum"] for p in params if p["required"]}
                wrong = []
                if "minimum" in schema:
                    wrong.append(schema["minimum"] - 1)
                if "maximum" in schema:
                    wrong.append(schema["maximum"] + 1)
                for value in wrong:
                    answer = plane.client.request(
                        method,
                        url,
                        params=others | {name: value},
                        headers=agent,
                        json=body,
                    )
                    assert answer.status_code == 400, (method, path, name, value)
                    assert f"query.{name}: " in answer.json()["detail"]["message"]
                    checked += 1
                if param["required"]:
                    others.pop(name)
                    answer = plane.client.request(
                        method, url, params=others, headers=agent, json=body
                    )
                    assert answer.status_code == 400, (method, path, name)
                    assert f"query.{name}: Field required" in answer.json()["detail"]["message"]
                    checked += 1
    assert checked >= 8


def test_the_document_is_written_on_its_first_request_not_at_start_up(
    settings: Settings,
) -> None:
    code = """
import sys, httpx
from trainops._settings import Settings
from trainops.server import EmbeddedServer
with EmbeddedServer(Settings.load()) as server:
    before = "trainops.server._openapi" in sys.modules
    document = httpx.get(server.url + "/openapi.json").json()
    print(before, "trainops.server._openapi" in sys.modules, document["info"]["title"])
"""
    env = {**os.environ, "TRAINOPS_HOME": str(settings.home)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True", "trainops"], done.stderr
