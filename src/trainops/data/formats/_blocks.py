"""The read buffer under every record reader: a binary stream read in large blocks.

Readers ask for ``need`` bytes at a time and parse them in place with ``struct.unpack_from``;
the stream is read a block at a time (never a few bytes per call), and a record is only kept
once its bytes have actually arrived, so a length field that claims gigabytes costs nothing
until the stream delivers them.
"""

from __future__ import annotations

from typing import BinaryIO

__all__ = ["BlockStream"]


class BlockStream:
    """``data[pos:]`` is what has been read and not yet consumed; ``base`` is the stream
    offset of ``data[0]``."""

    def __init__(self, stream: BinaryIO, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be 1 or more, not {block_size}")
        self._stream = stream
        self._block = block_size
        self.data = b""
        self.pos = 0
        self.base = 0
        self.eof = False

    @property
    def offset(self) -> int:
        """The stream offset of the next unread byte."""
        return self.base + self.pos

    @property
    def available(self) -> int:
        return len(self.data) - self.pos

    def fill(self, need: int) -> bool:
        """Make ``need`` unread bytes available; False when the stream ends first."""
        have = len(self.data) - self.pos
        if have >= need:
            return True
        parts = [self.data[self.pos :]]
        while have < need and not self.eof:
            chunk = self._stream.read(self._block)
            if not chunk:
                self.eof = True
            parts.append(chunk)
            have += len(chunk)
        self.base += self.pos
        self.data, self.pos = b"".join(parts), 0
        return have >= need

    def seek_forward(self, offset: int) -> None:
        """Drop everything before stream ``offset`` (at or after :attr:`offset`)."""
        while self.base + len(self.data) < offset and self.fill(self.available + 1):
            pass
        self.pos = min(max(self.pos, offset - self.base), len(self.data))
