"""The metric scraping worker: a separate process that runs the job's metric regexes.

A user's regex may take exponential time on some line (``(a+)+$``), and Python's ``re`` holds
the GIL while it runs, so it cannot run in the agent. The agent starts this module as a script
(``python -I -S _scrape_worker.py <fd>``; the standard library only, and not even ``site`` or
``typing`` imported: it starts once per job, on the launch path), or forks the job's first
worker ahead of time (``_worker_fork``: no interpreter's start), and talks to it in frames: a
4-byte big-endian length, then the payload. The first frame is the JSON list of
``[name, regex]``; each later frame is lines joined by newlines (UTF-8), answered with the
values found (first capture group of ``re.search``, finite numbers only) in columns: a 4-byte
length and a JSON list ``[[name, count], ...]``, then for each name in that order ``count``
line indexes (int64) and ``count`` values (float64), in this machine's byte order. Columns cost
next to nothing to write and read, where JSON took longer than the searches.

Progress goes to the 3 int64 of the shared file ``<fd>``: a counter bumped before each group
of at most 64 searches, the pattern index and the first line of the group. The agent kills
this process when the counter stands still longer than its time budget, and so knows which
pattern to disable.
"""

from __future__ import annotations

import json
import math
import mmap
import re
import struct
import sys
from array import array

TYPE_CHECKING = False  # not typing's: importing typing costs a few ms of every job's start
if TYPE_CHECKING:
    from typing import IO

GROUP = 64
_HEADER = struct.Struct("!I")


def read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    return data if len(data) == size else None


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def scan(
    patterns: list[tuple[str, re.Pattern[str]]], lines: list[str], progress: memoryview
) -> list[tuple[str, array[int], array[float]]]:
    """``(name, line indexes, values)`` of each pattern that found values in ``lines``."""
    found = []
    for index, (name, pattern) in enumerate(patterns):
        at_lines, values = array("q"), array("d")
        search = pattern.search
        for start in range(0, len(lines), GROUP):
            progress[1], progress[2] = index, start
            progress[0] += 1
            group = lines[start : start + GROUP]
            hits = [(at, m) for at, m in enumerate(map(search, group), start) if m is not None]
            if hits:
                _take(hits, at_lines, values)
        if values:
            found.append((name, at_lines, values))
    progress[0] += 1
    return found


def _take(
    hits: list[tuple[int, re.Match[str]]], at_lines: array[int], values: array[float]
) -> None:
    """The values of ``hits`` that are finite numbers, with their line indexes."""
    try:  # usually every capture is a number: convert them all at once
        numbers = [float(match.group(1)) for _at, match in hits]
    except (TypeError, ValueError):  # a group that did not take part, or not a number
        numbers = []
    if len(numbers) == len(hits) and all(map(math.isfinite, numbers)):
        at_lines.extend(at for at, _match in hits)
        values.extend(numbers)
        return
    for at, match in hits:
        value = number(match.group(1))
        if value is not None:
            at_lines.append(at)
            values.append(value)


def encode_found(found: list[tuple[str, array[int], array[float]]]) -> bytes:
    header = json.dumps([[name, len(values)] for name, _at, values in found]).encode()
    parts = [_HEADER.pack(len(header)), header]
    for _name, at_lines, values in found:
        parts += (at_lines.tobytes(), values.tobytes())
    return b"".join(parts)


def decode_found(payload: bytes) -> list[tuple[str, array[int], array[float]]]:
    """What :func:`encode_found` wrote; ``ValueError`` if it is not that."""
    (size,) = _HEADER.unpack_from(payload)
    at = _HEADER.size + size
    found = []
    for name, count in json.loads(payload[_HEADER.size : at]):
        at_lines, values = array("q"), array("d")
        middle = at + count * at_lines.itemsize
        end = middle + count * values.itemsize
        at_lines.frombytes(payload[at:middle])
        values.frombytes(payload[middle:end])
        if len(values) != count:
            raise ValueError("a truncated reply")
        found.append((str(name), at_lines, values))
        at = end
    return found


def main(argv: list[str]) -> int:
    return serve(int(argv[1]), sys.stdin.buffer, sys.stdout.buffer)


def serve(shared_fd: int, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer the agent's frames on ``stdin`` until it closes; progress to ``shared_fd``."""
    with open(shared_fd, "r+b") as shared:
        shared_map = mmap.mmap(shared.fileno(), 24)
        progress = memoryview(shared_map).cast("q")
        header = read_frame(stdin)
        if header is None:
            return 0
        patterns = [(str(name), re.compile(str(regex))) for name, regex in json.loads(header)]
        while (frame := read_frame(stdin)) is not None:
            lines = frame.decode("utf-8", errors="replace").split("\n")
            write_frame(stdout, encode_found(scan(patterns, lines, progress)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
