"""The route table: each operation is declared once, and that one declaration both handles its
requests and describes it in the OpenAPI document (``_openapi.py``), so the two cannot drift.

An :class:`Operation` names its method, path, handler, query parameters (typed, with their
bounds), body model, body bound (``max_body``), success status and the errors it may answer.
:func:`starlette_routes` turns the table into Starlette routes. Each request goes through, in
this order: the Host and Origin checks (``_guard.py``, before any route), the credential (the
API token of a ``"token"`` route; an ``"agent"`` route's bearer token must be there), the path
and query (a bad one is a 400 naming it); an agent route's credential is then checked against
the store (``check_agent``, on a worker thread), so a request without a live agent token costs
no body and no parse; and only then the body, read within the route's bound (``_body.py``: a
413 before reading when Content-Length is over it). A sync handler then runs on the worker
pool, where its JSON body is parsed and validated too, and its answer rendered; after a large
body the freed memory is handed back to the system. Every path parameter (``{name}``) is a
string passed to the handler under its own name.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from trainops.server._body import TRIM_AFTER_BYTES, read_body, release_memory
from trainops.server._http import ApiError, JsonAnswer, bearer_token, error_answer, token_matches

__all__ = [
    "MAX_BODY_DEPTH",
    "SQLITE_INT_MAX",
    "Operation",
    "Param",
    "parse_params",
    "starlette_routes",
    "until_disconnect",
]

ParamType = Literal["string", "integer", "number", "array"]
Auth = Literal["token", "agent"]

SQLITE_INT_MAX = 2**63 - 1  # the largest integer the store can hold (cursors, attempts)
MAX_BODY_DEPTH = 64  # nesting of a JSON body's arrays and objects (pydantic gives up past ~250)
_MAX_DIGITS = 400

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PATH_PARAM = re.compile(r"{([^}:]+)}")
_SPACE = " \t\n\r\f\v"  # ASCII white space, which a number may have around it

_UNAUTHORIZED = (
    "missing or wrong token (Authorization: Bearer): the CLI and SDK read it from "
    "$TRAINOPS_HOME/token, or set TRAINOPS_TOKEN"
)
_AGENT_UNAUTHORIZED = "agent requests need their host's agent token"


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter: its name in the URL, JSON type, bounds and default.

    ``array`` is a repeated parameter (``?status=a&status=b``) of strings; ``choices`` bounds
    the values of a string (or of an array's items); ``convert`` turns a string into what the
    handler gets (a ``ValueError`` says why it cannot). ``arg`` is the handler's keyword when it
    is not ``name``.
    """

    name: str
    type: ParamType = "string"
    required: bool = False
    default: Any = None
    ge: int | float | None = None
    le: int | float | None = None
    choices: tuple[str, ...] | None = None
    convert: Callable[[str], Any] | None = None
    arg: str | None = None
    description: str | None = None

    def parse(self, query: QueryParams) -> Any:
        """The value of this parameter in ``query`` (Starlette's query params); :class:`_Bad`."""
        if self.type == "array":
            values: list[str] = query.getlist(self.name)
            for value in values:
                self._check_choice(value)
            return values or self.default
        raw: str | None = query.get(self.name)  # repeated: the last one counts
        if raw is None:
            if self.required:
                raise _Bad("Field required")
            return self.default
        if self.type == "integer":
            return self._bounded(_integer(raw))
        if self.type == "number":
            return self._bounded(_number(raw))
        self._check_choice(raw)
        if self.convert is not None:
            try:
                return self.convert(raw)
            except ValueError as exc:
                raise _Bad(str(exc)) from None
        return raw

    def _check_choice(self, value: str) -> None:
        if self.choices is not None and value not in self.choices:
            raise _Bad(f"unknown value {value[:80]!r}; use one of {', '.join(self.choices)}")

    def _bounded(self, value: int | float) -> int | float:
        if self.ge is not None and not value >= self.ge:
            raise _Bad(f"Input should be greater than or equal to {self.ge}")
        if self.le is not None and not value <= self.le:
            raise _Bad(f"Input should be less than or equal to {self.le}")
        return value


@dataclass(frozen=True, slots=True)
class Operation:
    """One route: what it accepts, what it answers, and the handler that does it.

    ``body`` is the JSON body's model: the handler gets the validated model as ``body``, or the
    raw bytes when ``raw_body`` is set (it parses them itself). ``auth`` is ``"token"`` (the
    server's API token, when it has one) or ``"agent"`` (a bearer token the handler gets as
    ``token`` and the controller checks). ``returns`` is the success answer's JSON schema (or
    model); ``errors`` the error statuses it may answer besides those every route may (403, the
    401 of ``auth`` and, with ``store``, 503 and 507). ``check_agent`` (for ``"agent"`` routes)
    is called with the path's ``job`` and ``host``, the token and the query's ``attempt`` (or
    ``None``) before the body is read, and raises to refuse the request. A ``long_poll``
    handler (async) is cancelled as soon as its client hangs up, so a closed tab stops waiting.
    """

    method: Literal["GET", "POST"]
    path: str
    handler: Callable[..., Any]
    params: tuple[Param, ...] = ()
    body: type[BaseModel] | None = None
    raw_body: bool = False
    max_body: int = 1024 * 1024
    status: int = 200
    errors: tuple[int, ...] = ()
    auth: Auth | None = None
    store: bool = True
    returns: type[BaseModel] | Mapping[str, Any] | None = None
    summary: str | None = None
    description: str | None = None
    check_agent: Callable[[str, str, str, int | None], None] | None = None
    long_poll: bool = False
    path_params: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path_params", tuple(_PATH_PARAM.findall(self.path)))

    @property
    def name(self) -> str:
        return self.handler.__name__


class _Bad(Exception):
    """A parameter's value is wrong (the message, without the parameter's name)."""


def starlette_routes(
    operations: list[Operation], *, token: str | None, store_path: Path
) -> list[Route]:
    """One Starlette route per operation; ``token``, when set, guards the ``"token"`` ones."""
    return [_route(op, token, store_path) for op in operations]


def _route(op: Operation, token: str | None, store_path: Path) -> Route:
    is_async = inspect.iscoroutinefunction(op.handler)
    handler: Callable[..., Any] = op.handler

    def answer(result: Any) -> Response:
        return result if isinstance(result, Response) else JsonAnswer(result, op.status)

    def run(work: list[Any]) -> Response:
        # On a worker thread: the body's parsing and validation, the handler, the JSON answer.
        # ``work`` is emptied at once and errors are answered here: an idle worker thread keeps
        # its last arguments and exception (with its frames), which must not hold the body.
        kwargs, body, content_type = work
        work.clear()
        try:
            if body is not None:
                kwargs["body"] = body if op.raw_body else _model(op.body, body, content_type)
                body = None
            return answer(handler(**kwargs))
        except Exception as exc:
            known = error_answer(exc, store_path)
            if known is None:
                raise
            return known

    async def respond(request: Request, size: list[int]) -> Response:
        # Credential first (_arguments), then the body within its bound; ``size`` gets its length.
        try:
            kwargs = _arguments(op, request, token)
            if op.check_agent is not None:  # before the body: a wrong token reads none of it
                args = (kwargs["job"], kwargs["host"], kwargs["token"], kwargs.get("attempt"))
                await anyio.to_thread.run_sync(op.check_agent, *args)
            body = content_type = None
            if op.body is not None:
                body = await read_body(request, op.max_body)
                size.append(len(body))
                content_type = request.headers.get("content-type")
            if not is_async:
                work = [kwargs, body, content_type]
                del kwargs, body
                result: Response = await anyio.to_thread.run_sync(run, work)
                return result
            if body is not None:
                kwargs["body"] = body if op.raw_body else _model(op.body, body, content_type)
            if op.long_poll:
                return answer(await until_disconnect(request, handler(**kwargs)))
            return answer(await handler(**kwargs))
        except Exception as exc:
            known = error_answer(exc, store_path)
            if known is None:
                raise
            return known

    async def endpoint(request: Request) -> Response:
        size: list[int] = []
        response = await respond(request, size)
        if size and size[0] >= TRIM_AFTER_BYTES:  # the body and its parse are freed by now
            await anyio.to_thread.run_sync(release_memory, size[0])
        return response

    route = Route(op.path, endpoint, methods=[op.method], name=op.name)
    route.methods = {op.method}  # no implicit HEAD for a GET: it is not in the document
    return route


async def until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """``work``'s result; cancelled, with an empty answer that no one reads, as soon as the client
    hangs up (a long-poll must not outlive the tab that asked)."""
    task = asyncio.ensure_future(work)
    hangup = asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait((task, hangup), return_when=asyncio.FIRST_COMPLETED)
    finally:
        hangup.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return Response(status_code=204)
    return task.result()


async def _hung_up(request: Request) -> None:
    """Return once the client has gone (the request's body has been read by now)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _arguments(op: Operation, request: Request, token: str | None) -> dict[str, Any]:
    headers = request.headers
    kwargs: dict[str, Any] = dict(request.path_params)
    if op.auth == "token":
        if token and not token_matches(bearer_token(headers), token):
            raise ApiError(401, "unauthorized", _UNAUTHORIZED)
    elif op.auth == "agent":
        given = bearer_token(headers)
        if given is None:
            raise ApiError(401, "unauthorized", _AGENT_UNAUTHORIZED)
        kwargs["token"] = given
    if op.params:
        kwargs |= parse_params(op.params, request.query_params)
    return kwargs


def parse_params(params: tuple[Param, ...], query: QueryParams) -> dict[str, Any]:
    """The handler's keyword arguments from ``query``; :class:`ApiError` 400 naming each bad
    parameter."""
    kwargs: dict[str, Any] = {}
    problems = []
    for param in params:
        try:
            kwargs[param.arg or param.name] = param.parse(query)
        except _Bad as bad:
            problems.append(f"query.{param.name}: {bad}")
    if problems:
        raise ApiError(400, "bad_request", "; ".join(problems))
    return kwargs


def _integer(raw: str) -> int:
    text = raw.strip(_SPACE)
    if len(text) > _MAX_DIGITS:
        raise _Bad(f"the number has more than {_MAX_DIGITS} digits")
    if not _INTEGER.fullmatch(text):
        raise _Bad("Input should be a valid integer, unable to parse string as an integer")
    return int(text)


def _number(raw: str) -> float:
    text = raw.strip(_SPACE)
    if len(text) > _MAX_DIGITS or not _NUMBER.fullmatch(text):
        raise _Bad("Input should be a valid number, unable to parse string as a number")
    value = float(text)
    if not math.isfinite(value):
        raise _Bad("Input should be a finite number")
    return value


def _model(
    model: type[BaseModel] | None, body: bytes | bytearray, content_type: str | None
) -> BaseModel:
    """The body as ``model``; :class:`ApiError` 400 (naming the field) when it is not one."""
    assert model is not None
    data = json_body(body, content_type)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(['body', *(str(p) for p in err['loc'])])}: {err['msg']}"
            for err in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        raise ApiError(400, "bad_request", "; ".join(problems) or "malformed body") from None


def json_body(body: bytes | bytearray, content_type: str | None) -> Any:
    """A request's JSON body, parsed; :class:`ApiError` 400 if it is not JSON or nests too deep.

    JSON is read from a body sent as ``application/json`` (or ``application/<x>+json``), as the
    document says: any other content type is refused.
    """
    if not body:
        raise ApiError(400, "bad_request", "body: Field required")
    if not _is_json(content_type):
        raise ApiError(
            400,
            "bad_request",
            f"body: the content type must be application/json, not {(content_type or '')[:80]!r}",
        )
    try:
        data = json.loads(body)
    except RecursionError:
        raise ApiError(400, "bad_request", "body: the JSON nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        raise ApiError(400, "bad_request", f"body: the body is not JSON: {exc}") from None
    if _too_deep(data, MAX_BODY_DEPTH):
        raise ApiError(
            400, "bad_request", f"body: the JSON nests deeper than {MAX_BODY_DEPTH} levels"
        )
    return data


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _too_deep(data: Any, limit: int) -> bool:
    """Whether ``data`` nests lists and dicts more than ``limit`` levels deep (no recursion)."""
    level: list[Any] = [data]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, list | dict)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not any(isinstance(item, list | dict) for item in level):
            return False
    return True
