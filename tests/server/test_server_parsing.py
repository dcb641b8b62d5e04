"""The route table's own request parsing: query values, JSON bodies, and hostile input.

The server is plain Starlette: what FastAPI used to do for it (typed, bounded query parameters,
JSON bodies validated by pydantic, every refusal a 400 naming what is wrong, the router's 404
and 405 in the error shape) is ``_routing.py``'s. Nothing a client sends may make it answer 5xx.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from starlette.datastructures import QueryParams

from tests.control._harness import ControlPlane
from trainops.client import page_lines
from trainops.server._http import ApiError
from trainops.server._routing import MAX_BODY_DEPTH, SQLITE_INT_MAX, Param, _Bad, json_body

API = "/api/v1"
JSON = {"Content-Type": "application/json"}


def _parse(param: Param, query: str) -> Any:
    return param.parse(QueryParams(query))


def test_integers_are_plain_decimal_digits_within_their_bounds() -> None:
    limit = Param("limit", "integer", default=50, ge=1, le=1000)
    assert _parse(limit, "") == 50
    assert _parse(limit, "limit=7") == 7
    assert _parse(limit, "limit=%207%20") == 7
    assert _parse(limit, "limit=1&limit=9") == 9  # repeated: the last one counts
    for text in ("abc", "", "1.0", "1e3", "0x10", "1_0", "%D9%A1", "%00", "--1"):
        with pytest.raises(_Bad, match="valid integer"):
            _parse(limit, f"limit={text}")
    for text, bound in (("0", "greater than or equal to 1"), ("1001", "less than or equal")):
        with pytest.raises(_Bad, match=bound):
            _parse(limit, f"limit={text}")
    with pytest.raises(_Bad, match="more than 400 digits"):
        _parse(limit, "limit=" + "9" * 100_000)
    cursor = Param("after", "integer", default=0, ge=0, le=SQLITE_INT_MAX)
    assert _parse(cursor, f"after={SQLITE_INT_MAX}") == SQLITE_INT_MAX
    with pytest.raises(_Bad, match="less than or equal"):
        _parse(cursor, f"after={SQLITE_INT_MAX + 1}")


def test_numbers_are_finite_decimals_within_their_bounds() -> None:
    wait = Param("wait", "number", default=0, ge=0, le=30)
    assert _parse(wait, "wait=0.5") == 0.5
    assert _parse(wait, "wait=.5") == 0.5
    assert _parse(wait, "wait=1e-5") == 1e-5
    assert _parse(wait, "wait=30") == 30
    for text in ("nan", "inf", "Infinity", "0x1", "1e", "", "%C2%A00"):
        with pytest.raises(_Bad, match="valid number"):
            _parse(wait, f"wait={text}")
    with pytest.raises(_Bad, match="finite"):
        _parse(wait, "wait=1e400")
    with pytest.raises(_Bad, match="less than or equal to 30"):
        _parse(wait, "wait=30.0000001")


def test_required_choices_arrays_and_conversions() -> None:
    attempt = Param("attempt", "integer", required=True, ge=1)
    with pytest.raises(_Bad, match="Field required"):
        _parse(attempt, "")
    status = Param("status", "array", choices=("Completed", "Failed"))
    assert _parse(status, "") is None
    assert _parse(status, "status=Completed&status=Failed") == ["Completed", "Failed"]
    with pytest.raises(_Bad, match="unknown value 'Running'; use one of Completed, Failed"):
        _parse(status, "status=Completed&status=Running")

    def positive(text: str) -> int:
        if not text.isdigit():
            raise ValueError(f"{text!r} is not a count")
        return int(text)

    count = Param("count", convert=positive)
    assert _parse(count, "count=3") == 3
    with pytest.raises(_Bad, match="'x' is not a count"):
        _parse(count, "count=x")


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b"", "application/json", "body: Field required"),
        (b"{}", None, "content type must be application/json"),
        (b"{}", "text/plain", "content type must be application/json"),
        (b"{}", "multipart/form-data; boundary=x", "content type must be application/json"),
        (b"{", "application/json", "not JSON"),
        (b"\xff\xfe\x00", "application/json", "not JSON"),
        (b"[" * 100_000, "application/json", "nests too deeply"),
        (b"[" * (MAX_BODY_DEPTH + 1) + b"]" * (MAX_BODY_DEPTH + 1), "application/json", "deeper"),
    ],
)
def test_a_body_that_is_not_usable_json_is_a_400(
    body: bytes, content_type: str | None, message: str
) -> None:
    with pytest.raises(ApiError) as caught:
        json_body(body, content_type)
    assert caught.value.status == 400 and message in caught.value.message


def test_json_bodies_are_read_as_json_says() -> None:
    nested = b"[" * MAX_BODY_DEPTH + b"]" * MAX_BODY_DEPTH
    assert json_body(nested, "application/json") is not None
    assert json_body(b'{"a": 1}', "application/json; charset=utf-8") == {"a": 1}
    assert json_body(b'{"a": 1}', "Application/Problem+JSON") == {"a": 1}
    assert json_body('{"a": "é"}'.encode("utf-16"), "application/json") == {"a": "é"}


def _raw(
    plane: ControlPlane,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """A request exactly as given (httpx would tidy up the hostile ones)."""
    url = urlsplit(plane.server.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        auth = {"Authorization": plane.client.headers["Authorization"]}
        for name, value in (auth | (headers or {})).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
    finally:
        conn.close()


def _error(plane: ControlPlane, method: str, path: str, **kwargs: Any) -> tuple[int, str, str]:
    status, headers, body = _raw(plane, method, path, **kwargs)
    assert headers["content-type"] == "application/json", body
    detail = json.loads(body)["detail"]
    return status, detail["error"], detail["message"]


@pytest.mark.slow
def test_hostile_requests_are_refused_in_the_error_shape(plane: ControlPlane) -> None:
    plane.submit("known", {"FAKE_LINES": "1"})
    plane.wait_ended("known")
    huge = "9" * 50_000  # a number far past any the store holds, in a request line HTTP takes
    queries = [
        f"{API}/jobs?limit={huge}",
        f"{API}/jobs?limit=-{huge}",
        f"{API}/jobs?limit=1e3",
        f"{API}/jobs?limit=%00",
        f"{API}/jobs?status=Completed&status=%FF",
        f"{API}/jobs?created_after=%00",
        f"{API}/jobs?created_before={huge}",
        f"{API}/jobs/known/logs?after={SQLITE_INT_MAX + 1}",
        f"{API}/jobs/known/logs?after=-1&limit=0&wait=nan",
        f"{API}/jobs/known/logs?wait=1e309",
        "/agent/v1/jobs/known/hosts/algo-1/assignment?attempt=x",
    ]
    for path in queries:
        status, kind, message = _error(plane, "GET", path, headers={"Authorization": "Bearer x"})
        if path.startswith("/agent"):
            assert (status, kind) == (400, "bad_request"), message
            assert message.startswith("query.attempt: ")
            continue
        assert (status, kind) == (401, "unauthorized"), path  # the token is checked first
        status, kind, message = _error(plane, "GET", path)
        assert (status, kind) == (400, "bad_request"), (path, message)
        assert message.startswith("query."), message  # names the parameter
    bodies: list[tuple[bytes, dict[str, str]]] = [
        (b"", JSON),
        (b"not json", JSON),
        (b"\xff\xfe\x00", JSON),
        (b"[" * 200_000, JSON),
        (b'{"job_name": "x", "spec": ' + b"[" * 1000 + b"]" * 1000 + b"}", JSON),
        (b'{"job_name": 1, "spec": [], "code_uri": null}', JSON),
        (b"null", JSON),
        (b'{"job_name": "x", "spec": {}, "code_uri": "x"}', {}),
        (b'{"job_name": "x", "spec": {}, "code_uri": "x"}', {"Content-Type": "text/plain"}),
        (b"job_name=x", {"Content-Type": "application/x-www-form-urlencoded"}),
    ]
    for body, headers in bodies:
        for path in (f"{API}/jobs", f"{API}/job-names"):
            status, kind, message = _error(plane, "POST", path, body=body, headers=headers)
            assert (status, kind) == (400, "bad_request"), (path, body[:40], message)
            assert message.startswith("body"), message
    # A spec field named `self` is an unknown field (JobSpec(**spec) cannot take it).
    spec = {"entry_point": "t.py", "self": 1}
    named = json.dumps({"job_name": "s", "spec": spec, "code_uri": plane.code_uri}).encode()
    assert _error(plane, "POST", f"{API}/jobs", body=named, headers=JSON)[:2] == (
        422,
        "invalid_spec",
    )
    # An agent's events without a live token: a deep body, a huge attempt, and not JSON at all
    # are all 401, the credential being checked before the body is read.
    events = "/agent/v1/jobs/known/hosts/algo-1/events"
    agent = {"Authorization": "Bearer guess", **JSON}
    for body in (b"[" * 200_000, b"\xff", b'{"attempt": 99999999999999999999999, "events": []}'):
        status, kind, _message = _error(plane, "POST", events, body=body, headers=agent)
        assert (status, kind) == (401, "unauthorized")
    # An Origin that is not even a URL is another site's.
    assert _error(plane, "GET", f"{API}/jobs", headers={"Origin": "http://[::1"})[:2] == (
        403,
        "forbidden",
    )


@pytest.mark.slow
def test_a_body_past_its_operations_limit_is_refused_unread(plane: ControlPlane) -> None:
    big = b'{"base_job_name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    status, kind, message = _error(plane, "POST", f"{API}/job-names", body=big, headers=JSON)
    assert (status, kind) == (413, "payload_too_large") and "1048576 bytes" in message
    # Announced small, sent big: the stream is counted too (the server stops reading).
    url = urlsplit(plane.server.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    try:
        conn.putrequest("POST", f"{API}/job-names")
        conn.putheader("Authorization", plane.client.headers["Authorization"])
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for _ in range(3):
            conn.send(b"%x\r\n%s\r\n" % (1024 * 1024, b" " * (1024 * 1024)))
        conn.send(b"0\r\n\r\n")
        reply = conn.getresponse()
        assert reply.status == 413, reply.read()
    finally:
        conn.close()
    document = plane.client.get("/openapi.json").json()["paths"]
    assert "413" in document[f"{API}/jobs"]["post"]["responses"]
    assert "413" not in document[f"{API}/jobs"]["get"]["responses"]


@pytest.mark.slow
def test_a_page_of_logs_comes_as_lines_or_as_runs(plane: ControlPlane) -> None:
    plane.submit("chatty", {"FAKE_LINES": "30"})
    plane.wait_ended("chatty")
    lines = plane.client.get(f"{API}/jobs/chatty/logs", params={"limit": 1000}).json()
    runs = plane.client.get(
        f"{API}/jobs/chatty/logs", params={"limit": 1000, "format": "runs"}
    ).json()
    assert "runs" not in lines and "lines" not in runs
    assert page_lines(runs) == lines["lines"] and runs["next"] == lines["next"]
    assert len(lines["lines"]) == 30  # (this stand-in agent sends one line an event: a run each)
    status, kind, message = _error(plane, "GET", f"{API}/jobs/chatty/logs?format=csv")
    assert (status, kind) == (400, "bad_request") and message.startswith("query.format")


@pytest.mark.slow
def test_the_router_answers_in_the_error_shape(plane: ControlPlane) -> None:
    assert _error(plane, "GET", f"{API}/nothing-here")[:2] == (404, "not_found")
    assert _error(plane, "GET", f"{API}/jobs/a%2Fb")[:2] == (404, "not_found")
    status, headers, _body = _raw(plane, "DELETE", f"{API}/jobs")
    assert status == 405 and headers["allow"] == "GET, POST"  # both routes of the path
    assert _error(plane, "PUT", f"{API}/health")[:2] == (405, "method_not_allowed")
    # HEAD is not in the document, so it is not served (as FastAPI did not), but /openapi.json's.
    status, headers, _body = _raw(plane, "HEAD", f"{API}/jobs")
    assert status == 405 and headers["allow"] == "GET, POST"
    assert _raw(plane, "HEAD", "/openapi.json")[0] == 200
    # A trailing slash is redirected to the route without it.
    status, headers, _body = _raw(plane, "GET", f"{API}/jobs/")
    assert status == 307 and headers["location"].endswith(f"{API}/jobs")
    status, headers, body = _raw(plane, "GET", "/docs")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"/openapi.json" in body and b"swagger-ui" in body


@pytest.mark.slow
def test_a_request_line_past_the_http_parser_s_limit_is_a_400(plane: ControlPlane) -> None:
    """Past 64 KiB the HTTP parser refuses the request line itself (400, in its own words: the
    request never reaches the API, token or no token), as servers do."""
    path = f"{API}/jobs?limit={'9' * 100_000}"
    for headers in ({"Authorization": "Bearer x"}, {}):
        assert _raw(plane, "GET", path, headers=headers)[0] == 400
