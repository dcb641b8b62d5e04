"""CloudWatch Logs' own spellings: stream names per host and attempt, paging tokens that
round-trip exactly and refuse anything else, and the simple terms of a filter pattern."""

from __future__ import annotations

import pytest

from trainops.server.aws import AwsError
from trainops.server.aws._log_words import parse_token, stream_names, term_filter, token
from trainops.store import LogPosition, LogStreamStats


def _stream(host: str, attempt: int, first_ts: float, job: str = "j") -> LogStreamStats:
    return LogStreamStats(job, host, attempt, first_ts, first_ts + 5, 10, 3)


def test_each_host_of_each_attempt_is_a_stream_of_its_own() -> None:
    streams = [
        _stream("algo-10", 1, 1700000000.9),
        _stream("algo-2", 1, 1700000000.1),
        _stream("algo-2", 2, 1700000000.5),  # retried within the same second
        _stream("algo-2", 3, 1700000050.0),
    ]
    named = stream_names(streams)
    assert sorted(named) == [
        "j/algo-10-1700000000",
        "j/algo-2-1700000000",
        "j/algo-2-1700000001",
        "j/algo-2-1700000050",
    ]
    assert named["j/algo-2-1700000001"].attempt == 2


@pytest.mark.parametrize(
    "position",
    [LogPosition(1700000000.123456789, 42), LogPosition.head(), LogPosition.tail()],
)
def test_a_token_names_its_position_exactly(position: LogPosition) -> None:
    assert parse_token(token("f", position)) == (False, position)
    assert parse_token(token("b", position)) == (True, position)
    assert len(token("f", position)) == 42


@pytest.mark.parametrize(
    "text",
    [
        "f/1",
        "x/" + "0" * 40,
        "f/" + "0" * 39,
        "f/" + "9" * 40,  # a cursor past SQLite's integers
        "f/" + "0" * 20 + "9" * 20,  # bits past 64
        "f/" + "0" * 20 + str(0x7FF8000000000000).zfill(20),  # NaN
        "f/" + "0" * 40 + "\n",
    ],
)
def test_anything_else_is_an_invalid_token(text: str) -> None:
    with pytest.raises(AwsError) as caught:
        parse_token(text)
    assert (caught.value.code, caught.value.message) == (
        "InvalidParameterException",
        "The specified nextToken is invalid.",
    )


def test_simple_terms() -> None:
    lines = ["ERROR disk full", "error: disk", "WARN slow disk", "ERROR Exiting now", "ok"]
    cases = {
        "": lines,
        "ERROR": ["ERROR disk full", "ERROR Exiting now"],
        "ERROR disk": ["ERROR disk full"],
        '"disk full"': ["ERROR disk full"],
        "?WARN ?Exiting": ["WARN slow disk", "ERROR Exiting now"],
        "ERROR -Exiting": ["ERROR disk full"],
        '"unclosed': [],
    }
    for pattern, wanted in cases.items():
        keep = term_filter(pattern)
        assert [line for line in lines if keep(line)] == wanted, pattern
    for pattern in ("{ $.level = 1 }", "[ip, user]", "%ERR.*%"):
        with pytest.raises(AwsError, match="simple terms only"):
            term_filter(pattern)
