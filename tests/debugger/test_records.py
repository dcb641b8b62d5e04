"""Record reads: a small event file is fetched once for all of its step's tensors; a big one a
record at a time; the cache holds a bounded number of bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainops.debugger import modes
from trainops.debugger.format import TensorFileWriter
from trainops.debugger.trial import LocalSource, Trial
from trainops.debugger.trial._records import RecordReader
from trainops.debugger.trial._tensor import Location


class CountingSource(LocalSource):
    """A real directory source that counts its ranged reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.ranges: list[tuple[str, int, int]] = []

    def read_range(self, key: str, start: int, end: int) -> bytes:
        self.ranges.append((key, start, end))
        return super().read_range(key, start, end)


def write(root: Path, steps: int, elements: int) -> None:
    writer = TensorFileWriter(root, "worker_0", sync=False)
    for step in range(steps):
        tensors = [(f"t{i}", np.full(elements, step, np.float32)) for i in range(5)]
        writer.write_step(step, modes.TRAIN, step, tensors)


def test_a_steps_tensors_cost_one_read_of_its_small_event_file(tmp_path: Path) -> None:
    write(tmp_path, 3, 100)
    source = CountingSource(tmp_path)
    trial = Trial(source)
    for step in range(3):
        for i in range(5):
            assert trial.tensor(f"t{i}").value(step)[0] == step
    assert len(source.ranges) == 3 and all(start == 0 for _, start, _ in source.ranges)


def locations(root: Path, step: int) -> list[Location]:
    trial = Trial(LocalSource(root))
    return [trial.tensor(f"t{i}")._raw[step]["worker_0"] for i in range(5)]


def test_a_big_event_file_is_read_a_record_at_a_time(tmp_path: Path) -> None:
    write(tmp_path, 1, 1000)  # five records of about 4 kB
    source = CountingSource(tmp_path)
    reader = RecordReader(source, whole_file_bytes=10_000)
    found = locations(tmp_path, 0)
    for location in found:
        reader.note(location)
    for location in found:
        assert len(reader.read(location)) == location.length
    assert [(start, end) for _, start, end in source.ranges] == [
        (loc.start, loc.start + loc.length) for loc in found
    ]


def test_the_cache_keeps_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    write(tmp_path, 6, 1000)  # about 20 kB per event file
    source = CountingSource(tmp_path)
    reader = RecordReader(source, cache_bytes=50_000)
    for step in range(6):
        found = locations(tmp_path, step)
        for location in found:
            reader.note(location)
        for location in found:
            assert len(reader.read(location)) == location.length
    assert len(source.ranges) == 6  # one whole-file read per step
    assert reader._held <= 50_000 and len(reader._files) == 2
