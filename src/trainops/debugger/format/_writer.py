"""The job side: each saved step becomes one event file and then its index file, both whole.

:class:`TensorFileWriter` writes ``events/<step>/<step>_<worker>.tfevents`` through a hidden
temporary name, fsyncs it and renames it into place, and only then writes the step's index the
same way: a reader lists index files, so it never sees a step whose events are not all there.
A crash mid-step leaves at most a hidden temporary file, which no reader lists.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trainops.data import tfrecord_frame
from trainops.debugger.config import CollectionManager
from trainops.debugger.format._event import encode_tensor_event
from trainops.debugger.format._index import IndexEntry, ShapeEntry, encode_index
from trainops.debugger.format._layout import (
    END_MARKER,
    check_worker,
    collections_key,
    event_file_key,
    index_key,
)
from trainops.debugger.modes import ModeKeys, parse_mode

__all__ = ["TensorFileWriter", "mark_training_end", "write_whole"]


def write_whole(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``path`` through a hidden temporary name in its folder, fsync'd, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
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

    def __init__(self, out_dir: str | os.PathLike[str], worker: str, *, sync: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.worker = check_worker(worker)
        self._sync = sync

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
        frames: list[bytes] = []
        entries: list[IndexEntry] = []
        offset = 0
        for name, value in tensors:
            frame = tfrecord_frame(
                encode_tensor_event(name, np.asarray(value), step, mode, mode_step, now)
            )
            entries.append(IndexEntry(name, offset, len(frame)))
            frames.append(frame)
            offset += len(frame)
        write_whole(self.out_dir / event_key, b"".join(frames), sync=self._sync)
        return entries

    def write_collections(self, manager: CollectionManager, num_workers: int = 1) -> None:
        """``collections/000000000/<worker>_collections.json`` with ``num_workers``."""
        manager.num_workers = int(num_workers)
        data = json.dumps(manager.to_json_dict()).encode()
        write_whole(self.out_dir / collections_key(self.worker), data, sync=self._sync)


def mark_training_end(out_dir: str | os.PathLike[str]) -> None:
    """Write ``training_job_end.ts``: readers then load what is left and stop waiting."""
    write_whole(Path(out_dir) / END_MARKER, f"{time.time():.6f}\n".encode())
