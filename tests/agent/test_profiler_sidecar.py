"""The profiler sidecar in real HostAgent runs: the script's profiler settings, system metrics
mirrored to the profiler prefix while the script runs, the artifact, and failing soft."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agent._support import make_job
from trainops._settings import Settings
from trainops.agent import HostResult
from trainops.agent.sidecars._profiler import DEFAULT_LOCAL_PATH
from trainops.profiler import ProfilerReader, SeriesKey
from trainops.profiler._names import META_KEYS
from trainops.protocol import HostOutcome
from trainops.spec._profiler import DEFAULT_PROFILER_LOCAL_PATH
from trainops.storage import store_for

# Waits (in the script) until the mirror has put a system chunk under the profiler prefix:
# the data is readable while the job runs, not only once it ended.
WATCHER = """
import json, os, time
config_path = os.environ["TRAINOPS_PROFILER_CONFIG"]
local = os.environ["TRAINOPS_PROFILER_DIR"]
remote = os.path.join(os.environ["REMOTE"], "system", os.environ["SM_CURRENT_HOST"])
deadline = time.time() + 60
while not (os.path.isdir(remote) and [f for f in os.listdir(remote) if f.endswith(".tsc")]):
    assert time.time() < deadline, "no system chunk under the profiler prefix"
    time.sleep(0.05)
print("remote chunk seen while running", flush=True)
report = {"config_path": config_path, "local": local, "config": json.load(open(config_path))}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "profiler.json"), "w") as f:
    json.dump(report, f)
"""


def test_system_metrics_reach_the_profiler_prefix_while_the_script_runs(tmp_path: Path) -> None:
    output_prefix = (tmp_path / "objects" / "jobs" / "job-1").as_uri()
    remote = tmp_path / "objects" / "jobs" / "job-1" / "profiler-output"
    job = make_job(
        tmp_path,
        {"train.py": WATCHER},
        output_prefix=output_prefix,
        instance_type="ml.m5.xlarge",
        profiler_config={"system_monitor_interval_millis": 100},
        environment={"REMOTE": str(remote)},
        mount_opt_ml=False,  # the paths below are the tree's own
    )
    assert job.run() == HostResult(HostOutcome.COMPLETED, 0, None)
    reporter = job.reporter
    assert "remote chunk seen while running" in reporter.lines("stdout")
    assert any(line.startswith("System monitor: every 100 ms") for line in reporter.lines())
    assert reporter.artifacts()["profiler"] == remote.as_uri()

    reader = ProfilerReader(store_for(remote.as_uri(), Settings(home=tmp_path)), remote.as_uri())
    reader.refresh()
    assert reader.errors == []
    series = reader.series[SeriesKey("system", "algo-1")]
    assert len(series) >= 2 and series.columns[:2] == ["time", "cpu"]
    assert set(reader.meta["algo-1"]) == set(META_KEYS)
    assert reader.meta["algo-1"]["instance_type"] == "ml.m5.xlarge"
    local = job.root / "output" / "profiler"
    mirrored = sorted(p.relative_to(remote) for p in remote.rglob("*") if p.is_file())
    assert mirrored == sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert not [p for p in mirrored if p.name.startswith(".")]  # no temporary name uploaded

    seen = json.loads((job.root / "output" / "data" / "profiler.json").read_text())
    assert seen["local"] == str(local)
    assert seen["config_path"] == str(job.root / "input" / "config" / "profilerconfig.json")
    config = seen["config"]
    assert config["version"] == 1 and config["host"] == "algo-1" and config["hosts"] == ["algo-1"]
    assert config["job_name"] == "job-1" and config["attempt"] == 1
    assert config["instance_type"] == "ml.m5.xlarge"
    assert config["local_path"] == str(local) and config["prefix"] == remote.as_uri()
    assert config["system_monitor_interval_millis"] == 100
    assert config["framework_profile_params"] is None and config["disable_profiler"] is False
    assert config["s3_output_path"] is None
    assert isinstance(config["job_start"], float)


def test_the_local_path_and_prefix_come_from_the_spec(tmp_path: Path) -> None:
    prefix = tmp_path / "elsewhere" / "prof"
    job = make_job(
        tmp_path,
        {"train.py": "import os; print(os.environ['TRAINOPS_PROFILER_DIR'])"},
        profiler_config={
            "s3_output_path": prefix.as_uri(),
            "system_monitor_interval_millis": 200,
            "framework_profile_params": {"local_path": "/opt/ml/output/my-profiler"},
        },
        mount_opt_ml=False,  # the path printed is the tree's own
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    local = job.root / "output" / "my-profiler"
    assert str(local) in job.reporter.lines("stdout")
    assert job.reporter.artifacts()["profiler"] == prefix.as_uri()
    assert (prefix / "meta" / "algo-1.json").is_file()
    chunks = sorted(p.name for p in (prefix / "system" / "algo-1").iterdir())
    assert chunks and chunks[0] == "1-000000.tsc"  # even a script shorter than one interval
    config = json.loads((job.root / "input" / "config" / "profilerconfig.json").read_text())
    assert config["framework_profile_params"]["detailed_profiling_config"]["start_step"] == 5


def test_a_job_that_does_not_profile_has_no_sidecar(tmp_path: Path) -> None:
    script = "import os; print('dir' in os.environ.get('TRAINOPS_PROFILER_DIR', 'none'))"
    for config in (None, {"disable_profiler": True}):
        job = make_job(tmp_path / str(bool(config)), {"train.py": script}, profiler_config=config)
        assert job.run().outcome is HostOutcome.COMPLETED
        assert "profiler" not in job.reporter.artifacts()
        assert not (job.root / "output" / "profiler").exists()
        assert not (job.root / "input" / "config" / "profilerconfig.json").exists()


def test_a_profiler_prefix_that_cannot_be_written_is_a_warning_not_a_failure(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the prefix's folder would be")
    job = make_job(
        tmp_path,
        {"train.py": "import time; time.sleep(0.5)"},
        profiler_config={"s3_output_path": (blocker / "prof").as_uri()},
    )
    assert job.run() == HostResult(HostOutcome.COMPLETED, 0, None)
    lines = job.reporter.lines()
    assert any(line.startswith("warning: uploading the profiler data to") for line in lines)
    assert (job.root / "output" / "profiler" / "meta" / "algo-1.json").is_file()


def test_the_default_local_path_is_the_specs() -> None:
    assert DEFAULT_LOCAL_PATH == DEFAULT_PROFILER_LOCAL_PATH
