"""The profiler's step and system series become TensorBoard scalars, each chunk read once."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import pytest

from tests.tensorboard._read import scalars, values
from trainops.profiler import MAX_CHUNK_BYTES, MODE_EVAL, MODE_TRAIN, STEP_COLUMNS, SeriesWriter
from trainops.tensorboard import ProfilerScalars, SummaryWriter

NAN = math.nan


def _steps(root: Path, rank: int, rows: list[tuple[float, ...]], prefix: str = "1-") -> None:
    directory = root / "framework" / "steps" / "algo-1" / f"rank-{rank}"
    writer = SeriesWriter(directory, {"kind": "steps"}, STEP_COLUMNS, prefix=prefix)
    for row in rows:
        writer.append(row)
    writer.close()


def _step_row(step: int, mode: float, duration: float) -> tuple[float, ...]:
    # time, step, mode, duration, data, forward, backward, optimizer, samples
    return (1000.0 + step, step, mode, duration, 0.1, 0.2, NAN, 0.05, 32.0)


def test_step_and_system_series_become_scalars(tmp_path: Path) -> None:
    root, logdir = tmp_path / "profiler", tmp_path / "tb"
    _steps(root, 0, [_step_row(s, MODE_TRAIN, 0.5 + s) for s in range(3)])
    _steps(root, 1, [_step_row(s, MODE_TRAIN, 0.7) for s in range(2)])
    _steps(root, 0, [_step_row(0, MODE_EVAL, 0.3), _step_row(0, MODE_EVAL, 0.4)], prefix="2-")
    columns = ["time", "cpu", "cpu0", "memory", "gpu0", "gpu0_memory", "gpu0_memory_bytes"]
    system = SeriesWriter(root / "system" / "algo-1", {"kind": "system"}, columns)
    system.append((2000.0, 40.0, 80.0, 12.5, 90.0, 30.0, 1e9))
    system.append((2000.5, 50.0, 85.0, 13.0, NAN, 31.0, 1e9))
    system.close()
    warnings: list[str] = []
    with SummaryWriter(logdir) as writer:
        reader = ProfilerScalars(root, "algo-1", writer.add_scalar, warnings.append)
        assert reader.poll() == 4
        assert reader.poll() == 0  # each chunk once
    points = scalars(logdir)
    assert points["steps/rank-0/duration"] == [(0, 0.5, 1000.0), (1, 1.5, 1001.0), (2, 2.5, 1002.0)]
    assert values(points, "steps/rank-1/duration") == [0.699999988079071] * 2  # float32
    # two evaluation passes, each numbering its steps from 0: TensorBoard gets 0, 1
    assert points["eval_steps/rank-0/duration"] == [
        (0, pytest.approx(0.3), 1000.0),
        (1, pytest.approx(0.4), 1000.0),
    ]
    assert "steps/rank-0/backward" not in points  # NaN: the phase was not seen
    assert {"steps/rank-0/data", "steps/rank-0/forward", "steps/rank-0/optimizer"} <= set(points)
    assert points["system/cpu"] == [(0, 40.0, 2000.0), (1, 50.0, 2000.5)]
    assert values(points, "system/memory") == [12.5, 13.0]
    assert points["system/gpu0"] == [(0, 90.0, 2000.0)]
    assert values(points, "system/gpu0_memory") == [30.0, 31.0]
    assert not any("cpu0" in tag or "bytes" in tag for tag in points)
    assert warnings == []


def test_chunks_that_appear_later_are_read_and_a_corrupt_one_is_skipped(tmp_path: Path) -> None:
    root, logdir = tmp_path / "profiler", tmp_path / "tb"
    warnings: list[str] = []
    with SummaryWriter(logdir) as writer:
        reader = ProfilerScalars(root, "algo-1", writer.add_scalar, warnings.append)
        assert reader.poll() == 0  # no directory yet
        _steps(root, 0, [_step_row(0, MODE_TRAIN, 1.0)])
        assert reader.poll() == 1
        bad = root / "framework" / "steps" / "algo-1" / "rank-0" / "1-000009.tsc"
        bad.write_bytes(b"TSC1 not really")
        _steps(root, 0, [_step_row(1, MODE_TRAIN, 2.0)], prefix="3-")
        assert reader.poll() == 1
    assert values(scalars(logdir), "steps/rank-0/duration") == [1.0, 2.0]
    assert len(warnings) == 1 and "1-000009.tsc" in warnings[0]


def test_a_huge_sparse_chunk_is_skipped_unread(tmp_path: Path) -> None:
    root, logdir = tmp_path / "profiler", tmp_path / "tb"
    _steps(root, 0, [_step_row(0, MODE_TRAIN, 1.0)])
    huge = root / "framework" / "steps" / "algo-1" / "rank-0" / "2-000000.tsc"
    with huge.open("wb") as handle:  # written by the job's script: 2 GiB of holes
        handle.truncate(2 << 30)
    warnings: list[str] = []
    tracemalloc.start()
    try:
        with SummaryWriter(logdir) as writer:
            reader = ProfilerScalars(root, "algo-1", writer.add_scalar, warnings.append)
            assert reader.poll() == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert values(scalars(logdir), "steps/rank-0/duration") == [1.0]
    [warning] = warnings
    assert "2-000000.tsc" in warning and f"more than a chunk may hold ({MAX_CHUNK_BYTES}" in warning
    assert peak < 16 * 1024 * 1024, peak
