"""Scalars from the profiler's local data: step timings and system metrics, as they appear.

Reads the chunks the step recorder and the system monitor write under the host's profiler
directory (``trainops.profiler``'s layout: ``framework/steps/<host>/rank-<r>/*.tsc`` and
``system/<host>/*.tsc``), each chunk once, in name order, and hands every value to
``add_scalar(tag, value, step, wall_time)``:

- ``steps/rank-<r>/<phase>`` in seconds, at the step's number, for ``duration``, ``data``,
  ``forward``, ``backward`` and ``optimizer``; ``eval_steps/...`` the same for evaluation
  steps, at their count (their own numbers start anew with each evaluation pass);
- ``system/<column>`` in percent, for ``cpu``, ``iowait``, ``memory``, ``gpu<N>`` and
  ``gpu<N>_memory``, at the sample's index.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from trainops.profiler import (
    MAX_CHUNK_BYTES,
    MODE_EVAL,
    ChunkError,
    SeriesChunk,
    decode_chunk,
    numbered,
)

__all__ = ["STEP_SCALARS", "SYSTEM_SCALARS", "ProfilerScalars"]

STEP_SCALARS = ("duration", "data", "forward", "backward", "optimizer")
SYSTEM_SCALARS = ("cpu", "iowait", "memory")
CHUNK_SUFFIX = ".tsc"

AddScalar = Callable[[str, float, int, float], None]


class ProfilerScalars:
    """Follows one host's profiler directory ``root``; call :meth:`poll` now and then."""

    def __init__(
        self, root: Path, host: str, add_scalar: AddScalar, warn: Callable[[str], None]
    ) -> None:
        self.root = root
        self.host = host
        self.add_scalar = add_scalar
        self.warn = warn
        self._read: set[Path] = set()
        self._system_index = 0
        self._counts: dict[tuple[str, bool], int] = {}

    def poll(self) -> int:
        """Read the chunks that appeared since the last poll; returns how many."""
        count = 0
        for _path, chunk in self._new_chunks(self.root / "system" / self.host):
            self._system(chunk)
            count += 1
        steps = self.root / "framework" / "steps" / self.host
        for rank_dir in _subdirs(steps):
            rank = rank_dir.name.removeprefix("rank-")
            for _path, chunk in self._new_chunks(rank_dir):
                self._steps(rank, chunk)
                count += 1
        return count

    def _new_chunks(self, directory: Path) -> Iterator[tuple[Path, SeriesChunk]]:
        try:
            names = sorted(p for p in directory.iterdir() if _is_chunk(p))
        except OSError:
            return
        for path in names:
            if path in self._read:
                continue
            self._read.add(path)
            try:
                yield path, decode_chunk(_read_chunk(path), str(path))
            except (OSError, ChunkError) as exc:
                self.warn(f"TensorBoard: skipping profiler chunk {path}: {exc}")

    def _steps(self, rank: str, chunk: SeriesChunk) -> None:
        columns = chunk.columns
        at = {name: i for i, name in enumerate(columns)}
        phases = [(name, at[name]) for name in STEP_SCALARS if name in at]
        step_at, mode_at = at.get("step"), at.get("mode")
        for row in chunk.rows:
            evaluating = mode_at is not None and row[mode_at] == MODE_EVAL
            group = "eval_steps" if evaluating else "steps"
            number = self._step_number(
                rank, evaluating, row[step_at] if step_at is not None else math.nan
            )
            for name, index in phases:
                value = row[index]
                if not math.isnan(value):
                    self.add_scalar(f"{group}/rank-{rank}/{name}", value, number, row[0])

    def _step_number(self, rank: str, evaluating: bool, step: float) -> int:
        """A training step's own number; for evaluation steps (numbered anew by each evaluation
        pass) a count of them, so that TensorBoard's steps only grow."""
        key = (rank, evaluating)
        count = self._counts.get(key, 0)
        self._counts[key] = count + 1
        if evaluating or not math.isfinite(step):
            return count
        return int(step)

    def _system(self, chunk: SeriesChunk) -> None:
        columns = chunk.columns
        wanted = [name for name in SYSTEM_SCALARS if name in columns]
        wanted += list(numbered(columns, "gpu").values())
        wanted += list(numbered(columns, "gpu_memory").values())
        picks = [(name, columns.index(name)) for name in wanted]
        for row in chunk.rows:
            for name, index in picks:
                value = row[index]
                if not math.isnan(value):
                    self.add_scalar(f"system/{name}", value, self._system_index, row[0])
            self._system_index += 1


def _is_chunk(path: Path) -> bool:
    return path.name.endswith(CHUNK_SUFFIX) and not path.name.startswith(".")


def _subdirs(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith("rank-"))
    except OSError:
        return []


def _read_chunk(path: Path) -> bytes:
    """A chunk file the job's script could have written: one larger than
    :data:`MAX_CHUNK_BYTES` is refused unread, and no more than its size and one byte is read."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_CHUNK_BYTES:
            raise ChunkError(f"{size} bytes, more than a chunk may hold ({MAX_CHUNK_BYTES} bytes)")
        data = handle.read(size + 1)
    if len(data) > size:
        raise ChunkError("it grew while it was read")
    return data
