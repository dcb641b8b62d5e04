"""The OpenAPI document is true: schemathesis calls every operation of a real server on loopback.

Each answer must be documented for its operation (status code, content type, body schema), and
no request, however odd, may make the server fail (5xx). The run is bounded (a few examples per
operation, no example database) so it stays well under a minute.
"""

from __future__ import annotations

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
