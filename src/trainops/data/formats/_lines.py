"""Text-line records: one record per line, decoded, read in large blocks.

A line ends at ``\\n`` (a ``\\r`` before it is dropped too); the last line needs no newline. A
line that does not decode, or that runs past ``max_line_bytes`` without a newline, is a
corrupt record: an error naming the source and the byte offset of the bad byte (or of the
line), or skipped (up to ``max_corrupt`` of them, counted and logged once).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import BinaryIO

from trainops.data._errors import CorruptBudget, CorruptRecordError
from trainops.data.formats._blocks import BlockStream

__all__ = ["LineReader"]


class LineReader:
    """Iterates over the lines of a binary stream as ``str``, without their line ending."""

    def __init__(
        self,
        stream: BinaryIO,
        *,
        source: str = "<stream>",
        encoding: str = "utf-8",
        max_corrupt: int = 0,
        block_size: int = 1 << 20,
        max_line_bytes: int = 64 << 20,
    ) -> None:
        codecs.lookup(encoding)  # an unknown encoding fails here, not at the first line
        self._in = BlockStream(stream, block_size)
        self._encoding = encoding
        self._budget = CorruptBudget(source, max_corrupt)
        self._max = max_line_bytes

    @property
    def skipped(self) -> int:
        """How many corrupt lines were skipped so far."""
        return self._budget.skipped

    def __iter__(self) -> Iterator[str]:
        for _, line in self.records():
            yield line

    def records(self) -> Iterator[tuple[int, str]]:
        """``(offset, line)`` for every line."""
        try:
            while (raw := self._next_line()) is not None:
                start, line = raw
                try:
                    yield start, self._decode(start, line)
                except CorruptRecordError as bad:
                    self._budget.spend(bad.offset, bad.reason)
        finally:
            self._budget.report()

    def _next_line(self) -> tuple[int, bytes] | None:
        blocks = self._in
        while blocks.fill(1):
            start = blocks.offset
            end = self._find_newline()
            if end is not None:
                line = blocks.data[blocks.pos : end]
                blocks.pos = end + 1
                return start, line[:-1] if line.endswith(b"\r") else line
            if blocks.available <= self._max:  # the last line, without a newline
                line, blocks.pos = blocks.data[blocks.pos :], len(blocks.data)
                return start, line
            self._budget.spend(start, f"line longer than {self._max} bytes (max_line_bytes)")
            self._skip_line()
        return None

    def _find_newline(self) -> int | None:
        """Where the current line's newline is, reading on until ``max_line_bytes``."""
        blocks = self._in
        searched = 0  # bytes of the current line already searched
        while True:
            limit = blocks.pos + self._max + 1
            end = blocks.data.find(b"\n", blocks.pos + searched, limit)
            if end != -1:
                return end
            searched = blocks.available
            if searched > self._max or not blocks.fill(searched + 1):
                return None

    def _skip_line(self) -> None:
        blocks = self._in
        while blocks.fill(1):
            end = blocks.data.find(b"\n", blocks.pos)
            if end != -1:
                blocks.pos = end + 1
                return
            blocks.pos = len(blocks.data)

    def _decode(self, start: int, line: bytes) -> str:
        try:
            return line.decode(self._encoding)
        except UnicodeDecodeError as error:
            reason = f"not {self._encoding}: {error.reason}"
            raise CorruptRecordError(self._budget.source, start + error.start, reason) from None
