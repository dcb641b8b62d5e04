"""End to end: `trainops run` of a two-host job with system monitoring at 100 ms; afterwards the
job's profiler prefix holds every host's system chunks and meta, read back with ProfilerReader."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job
from trainops._settings import Settings
from trainops.profiler import ProfilerReader, SeriesKey, numbered
from trainops.profiler._names import META_KEYS
from trainops.storage import store_for

pytestmark = pytest.mark.slow

BUSY = """
import os, time
print("profiler dir", os.environ["TRAINOPS_PROFILER_DIR"], flush=True)
end = time.time() + 2.0
while time.time() < end:  # keep a core busy for a while
    sum(range(10_000))
"""


def test_two_hosts_record_system_metrics_to_the_profiler_prefix(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        BUSY,
        job_name="monitored",
        instance_count=2,
        profiler_config={"system_monitor_interval_millis": 100},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    job = describe("monitored", home)
    prefixes = {a["Uri"] for a in job["Artifacts"] if a["Name"] == "profiler"}
    hosts = {a.get("Host") for a in job["Artifacts"] if a["Name"] == "profiler"}
    assert len(prefixes) == 1 and hosts == {"algo-1", "algo-2"}
    [prefix] = prefixes
    assert prefix.endswith("/monitored/profiler-output")

    reader = ProfilerReader(store_for(prefix, Settings(home=home)), prefix)
    assert reader.refresh()
    assert reader.errors == []
    assert sorted(reader.meta) == ["algo-1", "algo-2"]
    for host in ("algo-1", "algo-2"):
        meta = reader.meta[host]
        assert set(meta) == set(META_KEYS) and meta["interval_ms"] == 100
        series = reader.series[SeriesKey("system", host)]
        assert len(series) >= 5  # about 20 over the script's 2 s; a loaded machine skips some
        assert len(numbered(series.columns, "cpu")) == meta["cores"]
        busiest = max(max(series.column(c)) for c in numbered(series.columns, "cpu").values())
        assert busiest > 50.0  # the script kept one of the host's cores busy
        assert all(0 < v <= 100 for v in series.column("memory"))
