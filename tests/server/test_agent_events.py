"""The events route's own parsing: a batch read one event at a time, bad bodies refused."""

from __future__ import annotations

import json

import pytest

from trainops.protocol import EventKind
from trainops.server._agent_api import parse_batch
from trainops.server._http import ApiError


def test_a_batch_is_parsed_into_events() -> None:
    body = {
        "attempt": 2,
        "events": [
            {"seq": 1, "ts": 1.5, "kind": "log", "data": {"stream": "stdout", "lines": ["a"]}},
            {"seq": 2, "ts": 1.5, "kind": "exit", "data": {"outcome": "Completed"}},
        ],
    }
    attempt, events = parse_batch(json.dumps(body).encode())
    assert attempt == 2
    assert [(e.seq, e.kind) for e in events] == [(1, EventKind.LOG), (2, EventKind.EXIT)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff not json", "not JSON"),
        (b"[1, 2]", "an object"),
        (b'{"attempt": "1", "events": []}', "attempt must be an integer"),
        (b'{"attempt": 1, "events": {}}', "events a list"),
        (b'{"attempt": 1, "events": [{"seq": 1}]}', "malformed event"),
        (b'{"attempt": 1, "events": [{"seq": 1, "ts": 1, "kind": "nope", "data": {}}]}', "nope"),
        (b'{"attempt": 1, "events": [7]}', "malformed event"),
    ],
)
def test_a_bad_body_is_a_400_that_says_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_batch(body)
    assert caught.value.status == 400 and message in caught.value.message


@pytest.mark.parametrize(
    "body",
    [
        b'{"attempt": 1, "events": []} x',
        b'{"attempt": 1, "events": [],}',
        b'{"attempt": 1 "events": []}',
        b'{"attempt": 1, "events": [{"seq": 1, "ts": 1, "kind": "log", "data": {}},]}',
        b'{1: 2, "attempt": 1, "events": []}',
        b'{"attempt": 1, "events": [',
        b"",
    ],
)
def test_what_json_refuses_the_piecewise_parser_refuses(body: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(body)
    with pytest.raises(ApiError) as caught:
        parse_batch(body)
    assert caught.value.status == 400


def test_members_in_any_order_with_white_space_and_the_last_of_a_repeated_one() -> None:
    event = {"seq": 1, "ts": 1.5, "kind": "log", "data": {"stream": "stdout", "lines": ["a"]}}
    first, second = json.dumps(event), json.dumps({**event, "seq": 2})
    text = f' \n{{ "events" : [ {first} , {second} ] ,"extra": {{"a": [1]}}, "attempt" :1, '
    text += '"attempt": 3 }\t'
    attempt, events = parse_batch(text.encode())
    assert attempt == 3 and [e.seq for e in events] == [1, 2]
    assert parse_batch(b'{"attempt": 1, "events": []}') == (1, [])
    with pytest.raises(ApiError, match="attempt must be an integer"):
        parse_batch(b"{}")
