"""The TensorBoard sidecar on a real host agent running a real script."""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from tests._support.system import require_extra
from tests.agent._support import make_job
from tests.e2e._harness import wait_for
from tests.tensorboard._read import scalars, values
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.protocol import HostOutcome
from trainops.tensorboard import SESSION_END_TAG, SessionStatus

METRICS = [{"name": "loss", "regex": "loss=([0-9.]+)"}]

# Writes its own event files with torch's SummaryWriter into the job's TensorBoard path, prints
# metrics, then waits for the test to let it finish.
TORCH_SCRIPT = """
import json, os, time
from torch.utils.tensorboard import SummaryWriter
own = SummaryWriter(os.environ["TRAINOPS_TENSORBOARD_DIR"])
for step in range(3):
    print(f"loss={1.0 / (step + 1)}", flush=True)
    own.add_scalar("own/accuracy", step / 10, step)
own.flush()
config = json.load(open(os.environ["TENSORBOARD_CONFIG_FILE_PATH"]))
print("config", json.dumps(config), flush=True)
while not os.path.exists(os.environ["RELEASE"]):
    time.sleep(0.05)
print("loss=0.125", flush=True)
own.close()
"""


def test_scraped_metrics_and_the_scripts_own_files_are_synced_while_it_runs(
    tmp_path: Path,
) -> None:
    require_extra("torch", "torch.utils.tensorboard")
    release = tmp_path / "release"
    job = make_job(
        tmp_path,
        {"train.py": TORCH_SCRIPT},
        metric_definitions=METRICS,
        tensorboard_output_config={},
        environment={"RELEASE": str(release)},
    )
    remote = job.object_path(job.assignment.output_prefix) / "tensorboard"
    agent = job.agent()
    results = []
    runner = threading.Thread(target=lambda: results.append(agent.run()))
    runner.start()
    try:

        def synced() -> bool:
            if not (remote / "trainops").is_dir():
                return False
            ours, theirs = scalars(remote / "trainops"), scalars(remote)
            return len(ours.get("loss", [])) == 3 and len(theirs.get("own/accuracy", [])) == 3

        wait_for(synced, timeout=180, interval=0.2)  # generous: a loaded machine syncs late
        assert runner.is_alive()  # the script waits for `release`: the job is still running
    finally:
        release.touch()
        runner.join(timeout=120)
    assert results[0].outcome is HostOutcome.COMPLETED, job.reporter.lines()
    ours = scalars(remote / "trainops")
    assert values(ours, "loss") == [1.0, 0.5, pytest.approx(1 / 3), 0.125]
    assert [step for step, _v, _w in ours["loss"]] == [0, 1, 2, 3]
    assert values(scalars(remote), "own/accuracy") == pytest.approx([0.0, 0.1, 0.2])
    assert job.reporter.artifacts()["tensorboard"] == remote.as_uri()
    # what the script is told: the path it sees (/opt/ml where namespaces show the tree there)
    local = Path("/opt/ml") if opt_ml_shown(True) else job.root
    local = local / "output" / "tensorboard"
    config_line = next(line for line in job.reporter.lines() if line.startswith("config "))
    config = json.loads(config_line.removeprefix("config "))
    assert config == {"LocalPath": str(local), "S3OutputPath": remote.as_uri()}


def test_with_several_hosts_each_host_has_its_own_folder(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": "print('loss=2.5')\n"},
        host="algo-2",
        hosts=["algo-1", "algo-2"],
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (tmp_path / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    assert values(scalars(tmp_path / "tb" / "algo-2" / "trainops"), "loss") == [2.5]
    assert not (tmp_path / "tb" / "trainops").exists()
    assert job.reporter.artifacts()["tensorboard"] == (tmp_path / "tb").as_uri()


def test_a_sync_that_fails_is_logged_and_the_job_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the prefix's folder would be")
    job = make_job(
        tmp_path,
        {"train.py": "print('loss=1.0')\n"},
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (blocker / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    problems = [line for line in job.reporter.lines("agent") if line.startswith("TensorBoard:")]
    assert problems and all("(the job goes on)" in line for line in problems)
    local = job.root / "output" / "tensorboard" / "trainops"
    assert values(scalars(local), "loss") == [1.0]  # written locally all the same
    assert "tensorboard" not in job.reporter.artifacts()  # nothing reached the prefix


def test_a_retry_writes_a_run_of_its_own(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": "print('loss=4.0')\n"},
        attempt=2,
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (tmp_path / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    assert values(scalars(tmp_path / "tb" / "trainops-attempt-2"), "loss") == [4.0]
    assert not (tmp_path / "tb" / "trainops").exists()


# Stands in for the step recorder: step rows written as the profiler's step series.
STEPS_SCRIPT = """
import os, pathlib, time
from trainops.profiler import STEP_COLUMNS, SeriesWriter
root = pathlib.Path(os.environ["TRAINOPS_PROFILER_DIR"])
rank0 = root / "framework" / "steps" / os.environ["SM_CURRENT_HOST"] / "rank-0"
steps = SeriesWriter(rank0, {"kind": "steps"}, STEP_COLUMNS, prefix="test-", rotate_rows=4)
for step in range(10):
    steps.append((time.time(), step, 0.0, 0.1 + step, 0.01, 0.05, 0.03, 0.01, 32))
    print(f"loss={1.0 / (step + 1)}", flush=True)
    time.sleep(0.05)
steps.close()
"""


def test_a_profiling_job_has_its_step_and_system_metrics_as_scalars(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": STEPS_SCRIPT},
        metric_definitions=METRICS,
        tensorboard_output_config={},
        profiler_config={"system_monitor_interval_millis": 100},
    )
    assert job.run().outcome is HostOutcome.COMPLETED, job.reporter.lines()
    remote = job.object_path(job.assignment.output_prefix) / "tensorboard" / "trainops"
    points = scalars(remote)
    assert len(points["loss"]) == 10
    assert points["steps/rank-0/duration"] == [
        (step, pytest.approx(0.1 + step), wall)
        for step, _v, wall in points["steps/rank-0/duration"]
    ]
    assert [step for step, _v, _w in points["steps/rank-0/duration"]] == list(range(10))
    assert {"system/cpu", "system/memory"} <= set(points)
    assert all(0.0 <= value <= 100.0 for value in values(points, "system/cpu"))


# tbparse 0.0.9 calls pandas' sort_values(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_the_run_is_an_hparams_session_with_the_jobs_hyperparameters_and_outcome(
    tmp_path: Path,
) -> None:
    tbparse = require_extra("dev", "tbparse")
    hyperparameters = {"lr": 0.1, "optimizer": "adam", "layers": [64, 32], "nesterov": True}
    job = make_job(
        tmp_path,
        {"train.py": "print('loss=0.5')\n"},
        hyperparameters=hyperparameters,
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (tmp_path / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    run = tmp_path / "tb" / "trainops"
    reader = tbparse.SummaryReader(str(run))
    shown = dict(zip(reader.hparams["tag"], reader.hparams["value"], strict=True))
    assert shown == {"lr": 0.1, "optimizer": "adam", "layers": "[64, 32]", "nesterov": True}
    ends = _session_ends(run)
    assert [end.status for end in ends] == [SessionStatus.SUCCESS]


def test_a_failed_job_ends_its_session_as_a_failure(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": "import sys\nprint('loss=0.5')\nsys.exit(3)\n"},
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (tmp_path / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.FAILED
    assert [end.status for end in _session_ends(tmp_path / "tb" / "trainops")] == [
        SessionStatus.FAILURE
    ]


def _session_ends(run: Path) -> list[Any]:
    guidance = {"tensors": 0}
    accumulator = event_accumulator.EventAccumulator(str(run), size_guidance=guidance)
    accumulator.Reload()
    content = accumulator.SummaryMetadata(SESSION_END_TAG).plugin_data.content
    return [
        plugin_data_pb2.HParamsPluginData.FromString(content).session_end_info
        for _event in accumulator.Tensors(SESSION_END_TAG)
    ]


def test_past_the_queue_bound_the_scanner_writes_the_points_itself_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the package's factory of the same name hides the module: import it by its full name
    module = importlib.import_module("trainops.agent.sidecars._tensorboard")
    monkeypatch.setattr(module, "MAX_QUEUED_POINTS", 0)  # every batch is over the bound
    script = "import time\nfor i in range(300):\n    print(f'loss={i}', flush=True)\n    time.sleep(0.001 * (i % 9 == 0))\n"
    job = make_job(
        tmp_path,
        {"train.py": script},
        metric_definitions=METRICS,
        tensorboard_output_config={"s3_output_path": (tmp_path / "tb").as_uri()},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    points = scalars(tmp_path / "tb" / "trainops")["loss"]
    assert [(step, value) for step, value, _wall in points] == [(i, float(i)) for i in range(300)]
