"""What CloudWatch Logs' answer spells its own way: stream names as SageMaker names them
(``<job>/algo-1-<epoch>``), paging tokens (``f/…`` forward, ``b/…`` backward, as the SDKs'
tailers use them) and the simple terms of a filter pattern.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable

from trainops.server.aws._errors import AwsError
from trainops.store import LogPosition, LogStreamStats

__all__ = ["MAX_INT64", "invalid", "parse_token", "stream_names", "term_filter", "token"]

MAX_INT64 = (1 << 63) - 1  # SQLite's largest integer
_TOKEN = re.compile(r"([fb])/(\d{20})(\d{20})")
_TERM = re.compile(r'([?-]?)(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def invalid(message: str) -> AwsError:
    return AwsError(400, "InvalidParameterException", message)


def stream_names(streams: Iterable[LogStreamStats]) -> dict[str, LogStreamStats]:
    """Each stream by its name: ``<job>/<host>-<epoch>``, the epoch second of its first line
    (SageMaker names a stream by its instance's start), as an attempt's host gets a stream of its
    own; a name another attempt of the host already has moves on by a second."""
    named: dict[str, LogStreamStats] = {}
    order = sorted(streams, key=lambda s: (s.job, s.attempt, len(s.host), s.host))
    for stream in order:
        epoch = int(stream.first_ts)
        while f"{stream.job}/{stream.host}-{epoch}" in named:
            epoch += 1
        named[f"{stream.job}/{stream.host}-{epoch}"] = stream
    return named


def token(direction: str, position: LogPosition) -> str:
    """A paging token: the direction and the position (its time's exact bits and its cursor)."""
    (bits,) = struct.unpack("<Q", struct.pack("<d", position.ts))
    return f"{direction}/{position.cursor:020d}{bits:020d}"


def parse_token(text: str) -> tuple[bool, LogPosition]:
    """(backward, position) of a token :func:`token` made; anything else is refused. A forged
    token can only name a place in the stream it is given with, which its caller may read."""
    found = _TOKEN.fullmatch(text)
    bits = int(found.group(3)) if found else 1 << 64
    if found is None or bits >= 1 << 64 or int(found.group(2)) > MAX_INT64:
        raise invalid("The specified nextToken is invalid.")
    (ts,) = struct.unpack("<d", struct.pack("<Q", bits))
    if ts != ts:  # NaN
        raise invalid("The specified nextToken is invalid.")
    return found.group(1) == "b", LogPosition(ts, int(found.group(2)))


def term_filter(pattern: str) -> Callable[[str], bool]:
    """A filter pattern's simple terms (case-sensitive, as CloudWatch's): ``ERROR`` and
    ``"exact phrase"`` must each occur, ``?a ?b`` at least one of them, ``-x`` none. JSON,
    space-delimited and regular-expression patterns are refused with what is supported."""
    text = pattern.strip()
    if not text:
        return lambda line: True
    if text[0] in "{[%":
        raise invalid(
            "Invalid filter pattern: this server matches simple terms only "
            '(ERROR, "a phrase", ?either ?or, -excluded), not JSON, space-delimited or '
            "regular-expression patterns"
        )
    must: list[str] = []
    either: list[str] = []
    never: list[str] = []
    for sign, quoted, bare in _TERM.findall(text):
        term = quoted.replace('\\"', '"') if quoted else bare
        {"": must, "?": either, "-": never}[sign].append(term)
    return lambda line: (
        all(t in line for t in must)
        and (not either or any(t in line for t in either))
        and not any(t in line for t in never)
    )
