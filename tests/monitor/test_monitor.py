"""SystemMonitor: rows on the interval, chunks readable while it runs, meta, and no raising."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests._support.system import require_extra
from trainops._settings import Settings
from trainops.monitor import SystemMonitor, SystemSampler, write_meta
from trainops.profiler import ProfilerReader, SeriesKey
from trainops.profiler._names import META_KEYS
from trainops.storage import store_for


def _reader(root: Path) -> ProfilerReader:
    """The local profiler tree read as a prefix, as the mirror's destination would be."""
    return ProfilerReader(store_for(root.as_uri(), Settings(home=root)), root.as_uri())


def _wait(predicate: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_rows_follow_the_interval_and_chunks_are_readable_while_it_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    monitor = SystemMonitor(
        tmp_path,
        "algo-1",
        interval_ms=100,
        attempt=2,
        instance_type="ml.m5.xlarge",
        log=lines.append,
    )
    reader = _reader(tmp_path)
    started = time.monotonic()
    monitor.start()
    try:
        _wait(lambda: reader.refresh() and SeriesKey("system", "algo-1") in reader.series)
        running_when_seen = monitor.running
        seen_live = len(reader.series[SeriesKey("system", "algo-1")])
        time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    finally:
        monitor.stop()
    elapsed = time.monotonic() - started
    assert running_when_seen and seen_live >= 1  # data came back before the monitor stopped
    assert not monitor.running
    # ~elapsed / 0.1 s rows; loose bounds, as a loaded machine may skip ticks (never adds any)
    assert 0.3 * elapsed / 0.1 <= monitor.rows <= elapsed / 0.1 + 1
    assert [p.name for p in monitor.chunks] == [
        f"2-{i:06d}.tsc" for i in range(len(monitor.chunks))
    ]
    assert len(monitor.chunks) >= 2  # rotated while running, then the last one at stop
    reader.refresh()
    series = reader.series[SeriesKey("system", "algo-1")]
    assert len(series) == monitor.rows
    times = series.times
    assert times == sorted(times) and times[-1] - times[0] < elapsed
    assert series.header["interval_ms"] == 100 and series.header["kind"] == "system"
    meta = reader.meta["algo-1"]
    assert set(meta) == set(META_KEYS)
    assert meta["interval_ms"] == 100 and meta["attempt"] == 2
    with SystemSampler() as probe:  # what this machine has: no GPU in CI, one on a GPU machine
        machine_gpus = list(probe.gpu_info)
    assert meta["instance_type"] == "ml.m5.xlarge" and meta["gpus"] == machine_gpus
    assert meta["gpu_status"].startswith("off: ") == (machine_gpus == [])
    assert len(lines) == 1 and lines[0].startswith("System monitor: every 100 ms")
    assert ("GPU metrics off: " in lines[0]) == (machine_gpus == [])


def test_meta_is_written_whole_and_checked(tmp_path: Path) -> None:
    meta = {key: 1 for key in META_KEYS}
    path = write_meta(tmp_path, "algo-3", meta)
    assert path == tmp_path / "meta" / "algo-3.json"
    assert json.loads(path.read_text()) == meta
    assert [p.name for p in path.parent.iterdir()] == ["algo-3.json"]
    with pytest.raises(ValueError, match="lacks gpu_status"):
        write_meta(tmp_path, "algo-3", {k: 1 for k in META_KEYS if k != "gpu_status"})


def test_a_sampler_that_cannot_open_is_logged_once_and_never_raises(tmp_path: Path) -> None:
    lines: list[str] = []

    def broken() -> SystemSampler:
        raise PermissionError("/proc/stat: permission denied")

    monitor = SystemMonitor(tmp_path, "algo-1", interval_ms=100, log=lines.append, sampler=broken)
    monitor.start()
    assert monitor.ready.wait(10)
    monitor.stop()
    assert monitor.rows == 0 and monitor.failed is not None
    assert lines == [
        "System monitor: cannot read the host's counters (PermissionError: /proc/stat: "
        "permission denied); no more system metrics from this host"
    ]


class _Flaky(SystemSampler):
    """A real sampler whose second and third samples fail."""

    calls = 0

    def row(self) -> tuple[float, ...]:
        self.calls += 1
        if self.calls in (2, 3):
            raise OSError("transient read error")
        return super().row()


def test_a_failing_sample_is_skipped_and_logged_once(tmp_path: Path) -> None:
    lines: list[str] = []
    monitor = SystemMonitor(
        tmp_path, "algo-1", interval_ms=100, log=lines.append, sampler=lambda: _Flaky(gpus=False)
    )
    monitor.start()
    try:
        _wait(lambda: monitor.rows >= 3)
    finally:
        monitor.stop()
    assert monitor.failed is None
    assert [line for line in lines if "failed" in line] == [
        "System monitor: a sample failed (transient read error); skipping it"
    ]
    reader = _reader(tmp_path)
    reader.refresh()
    assert len(reader.series[SeriesKey("system", "algo-1")]) == monitor.rows


def test_a_monitor_started_again_adds_chunks_after_its_first(tmp_path: Path) -> None:
    monitor = SystemMonitor(tmp_path, "algo-1", interval_ms=100, gpus=False)
    for at_least in (1, 4):
        monitor.start()
        _wait(lambda at_least=at_least: monitor.rows >= at_least)
        monitor.stop()
    names = sorted(p.name for p in (tmp_path / "system" / "algo-1").iterdir())
    assert names == [f"1-{i:06d}.tsc" for i in range(len(monitor.chunks))] and len(names) >= 2
    reader = _reader(tmp_path)
    reader.refresh()
    assert len(reader.series[SeriesKey("system", "algo-1")]) == monitor.rows


def test_a_bad_interval_is_refused_and_stop_without_start_is_harmless(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval_ms must be positive"):
        SystemMonitor(tmp_path, "algo-1", interval_ms=0)
    monitor = SystemMonitor(tmp_path, "algo-1")
    monitor.stop()
    assert not (tmp_path / "system").exists()


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has a GPU")
def test_a_monitor_with_nvml_and_no_driver_says_why_in_its_meta_and_log(tmp_path: Path) -> None:
    require_extra("nvml")  # make test installs it: in CI, its absence fails
    lines: list[str] = []
    monitor = SystemMonitor(tmp_path, "algo-1", interval_ms=100, attempt=1, log=lines.append)
    reader = _reader(tmp_path)
    monitor.start()
    try:
        _wait(lambda: reader.refresh() and "algo-1" in reader.meta)
    finally:
        monitor.stop()
    reason = (
        "NVML could not be initialized (NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    )
    assert reader.meta["algo-1"]["gpu_status"].startswith(f"off: {reason}")
    assert reader.meta["algo-1"]["gpus"] == []
    assert f"GPU metrics off: {reason}" in lines[0]
