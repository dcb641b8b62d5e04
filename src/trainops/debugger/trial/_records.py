"""Reading a tensor's record: small event files are fetched whole, once, and kept a while.

A rule reads several tensors of one step; on S3 each record read alone is a request. An event
file whose records end within ``whole_file_bytes`` (the index says where they end) is read in
one request and kept in a small cache bounded in bytes, so the step's other tensors cost none.
A larger file is read one record at a time.
"""

from __future__ import annotations

from collections import OrderedDict

from trainops.debugger.trial._source import TrialSource
from trainops.debugger.trial._tensor import Location

__all__ = ["RecordReader"]


class RecordReader:
    """The bytes of one record, through a byte-bounded cache of whole small event files."""

    def __init__(
        self, source: TrialSource, *, whole_file_bytes: int = 8 << 20, cache_bytes: int = 32 << 20
    ) -> None:
        self._source = source
        self._whole = whole_file_bytes
        self._budget = cache_bytes
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._held = 0
        self.extents: dict[str, int] = {}  # event file -> where its last indexed record ends

    def note(self, location: Location) -> None:
        """An index named ``location``: its file holds at least up to the record's end."""
        end = location.start + location.length
        if end > self.extents.get(location.event_file, 0):
            self.extents[location.event_file] = end

    def forget_before(self, step: int) -> None:
        """Drop what is kept of the event files of global steps before ``step`` (their key
        says their step: ``events/<step>/...``); a record read later is read alone."""
        for key in [k for k in self.extents if _step_of(k) < step]:
            del self.extents[key]
            dropped = self._files.pop(key, None)
            if dropped is not None:
                self._held -= len(dropped)

    def read(self, location: Location) -> bytes:
        extent = self.extents.get(location.event_file, 0)
        end = location.start + location.length
        if extent > self._whole or end > extent:
            return self._source.read_range(location.event_file, location.start, end)
        data = self._files.get(location.event_file)
        if data is None:
            data = self._source.read_range(location.event_file, 0, extent)
            self._keep(location.event_file, data)
        else:
            self._files.move_to_end(location.event_file)
        return data[location.start : end]

    def _keep(self, key: str, data: bytes) -> None:
        self._files[key] = data
        self._held += len(data)
        while self._held > self._budget and len(self._files) > 1:
            _, dropped = self._files.popitem(last=False)
            self._held -= len(dropped)


def _step_of(key: str) -> int:
    """The global step in an event file's key (``events/000000000012/...``), -1 if none."""
    parts = key.split("/")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else -1
