"""The job side: each saved step becomes one event file and then its index file, both whole.

:class:`TensorFileWriter` writes ``events/<step>/<step>_<worker>.tfevents`` through a hidden
temporary name, fsyncs it and renames it into place, and only then writes the step's index the
same way: a reader lists index files, so it never sees a step whose events are not all there.
A crash mid-step leaves at most a hidden temporary file, which no reader lists. Records carry
smdebug's constant data CRC unless ``write_checksum`` (smdebug's reader refuses anything else).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from trainops.debugger.config import CollectionManager
from trainops.debugger.format._event import mode_metadata, tensor_event_parts
from trainops.debugger.format._index import IndexEntry, ShapeEntry, encode_index
from trainops.debugger.format._layout import (
    END_MARKER,
    check_worker,
    collections_key,
    event_file_key,
    index_key,
)
from trainops.debugger.format._records import record_footer, record_header
from trainops.debugger.modes import ModeKeys, parse_mode

__all__ = ["TensorFileWriter", "mark_training_end", "write_whole"]


def write_whole(path: Path, data: bytes | Callable[[BinaryIO], None], *, sync: bool = True) -> None:
    """Write ``path`` (``data``, or what ``data(stream)`` writes) through a hidden temporary
    name in its folder, fsync'd, then renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb", buffering=1 << 20) as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


class TensorFileWriter:
    """Writes one worker's steps under ``out_dir`` in smdebug's layout."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        worker: str,
        *,
        sync: bool = True,
        write_checksum: bool = False,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.worker = check_worker(worker)
        self._sync = sync
        self._checksum = write_checksum

    def write_step(
        self,
        step: int,
        mode: ModeKeys | str | int,
        mode_step: int,
        tensors: Sequence[tuple[str, np.ndarray]],
        *,
        shapes: Sequence[tuple[str, tuple[int, ...]]] = (),
        wall_time: float | None = None,
    ) -> None:
        """Save ``tensors`` (name, array) of global ``step``; ``shapes`` go to the index only."""
        if step < 0 or mode_step < 0:
            raise ValueError(f"steps must not be negative (step {step}, mode step {mode_step})")
        if not tensors and not shapes:
            return
        mode = parse_mode(mode)
        event_key = event_file_key(step, self.worker) if tensors else None
        entries = self._write_events(step, mode, mode_step, tensors, event_key, wall_time)
        shape_entries = [ShapeEntry(name, name, tuple(shape)) for name, shape in shapes]
        index = encode_index(mode, mode_step, event_key, entries, shape_entries)
        write_whole(self.out_dir / index_key(step, self.worker), index, sync=self._sync)

    def _write_events(
        self,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        tensors: Sequence[tuple[str, np.ndarray]],
        event_key: str | None,
        wall_time: float | None,
    ) -> list[IndexEntry]:
        if event_key is None:
            return []
        now = time.time() if wall_time is None else wall_time
        metadata = mode_metadata(mode, mode_step)
        entries: list[IndexEntry] = []

        def write(stream: BinaryIO) -> None:
            offset = 0
            for name, value in tensors:
                parts = tensor_event_parts(name, np.asarray(value), step, now, metadata)
                length = len(parts[0]) + len(parts[1])
                stream.write(record_header(length))
                stream.write(parts[0])
                stream.write(parts[1])  # the tensor's own bytes: never joined into a copy
                stream.write(record_footer(parts if self._checksum else None))
                entries.append(IndexEntry(name, offset, length + 16))
                offset += length + 16

        write_whole(self.out_dir / event_key, write, sync=self._sync)
        return entries

    def write_collections(self, manager: CollectionManager, num_workers: int = 1) -> None:
        """``collections/000000000/<worker>_collections.json`` with ``num_workers``."""
        manager.num_workers = int(num_workers)
        data = json.dumps(manager.to_json_dict()).encode()
        write_whole(self.out_dir / collections_key(self.worker), data, sync=self._sync)


def mark_training_end(out_dir: str | os.PathLike[str]) -> None:
    """Write ``training_job_end.ts``: readers then load what is left and stop waiting."""
    write_whole(Path(out_dir) / END_MARKER, f"{time.time():.6f}\n".encode())
