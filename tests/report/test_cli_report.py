"""``trainops report`` end to end: a real job whose script writes profiler chunks itself (with
SeriesWriter) into its profiler prefix, reported while it runs (through ``trainops server``) and
after it ended (through an embedded server), plus the one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.e2e._harness import CLI, Server, cli_env, describe, trainops, wait_for, write_job

SCRIPT = """
import json, os, time
from pathlib import Path
from trainops.profiler import SeriesWriter

root = Path(os.environ["PROFILE_ROOT"])
(root / "meta").mkdir(parents=True, exist_ok=True)
(root / "meta" / "algo-1.json").write_text(json.dumps({"host": "algo-1", "cores": 2,
    "instance_type": "ml.m5.large", "gpus": [], "gpu_status": "no GPU", "interval_ms": 100}))
system = SeriesWriter(root / "system" / "algo-1", {"kind": "system"},
                      ["time", "cpu", "cpu0", "cpu1", "memory"], prefix="1-")
steps = SeriesWriter(root / "framework" / "steps" / "algo-1" / "rank-0", {"kind": "steps"},
                     ["time", "step", "mode", "duration", "samples"], prefix="1-")
start = time.time()
for i in range(200):
    system.append([start + i * 0.1, 97.0, 96.0, 98.0, 40.0])
    steps.append([start + i * 0.1, i, 0.0, 0.09, 16.0])
system.flush()
steps.flush()
print("profiled", flush=True)
release = Path(os.environ["RELEASE"])
deadline = time.time() + 120
while not release.exists() and time.time() < deadline:
    time.sleep(0.1)
"""


def _job(tmp: Path) -> tuple[Path, Path]:
    out = tmp / "out"
    release = tmp / "release"
    spec = write_job(
        tmp, SCRIPT, job_name="reported", instance_type="ml.m5.large", output_path=out.as_uri(),
        environment={"PROFILE_ROOT": str(out / "reported" / "profiler-output"), "RELEASE": str(release)},
    )  # fmt: skip
    return spec, release


def test_report_on_a_running_job_then_on_the_finished_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spec, release = _job(tmp_path)
    server = Server(home).start()
    running_page = tmp_path / "running.html"
    try:
        submitted = trainops("submit", str(spec), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr

        def reported() -> subprocess.CompletedProcess[str] | None:
            done = trainops(
                "report",
                "reported",
                "-o",
                str(running_page),
                "--no-open",
                home=home,
                **server.env(),
            )
            if done.returncode != 0:
                return None
            # The script writes meta, then system chunks, then step chunks: a report taken in
            # between is a true snapshot of less; wait for the one with every step.
            ranks = json.loads(running_page.with_suffix(".json").read_text())["sections"]
            ranks = ranks["step_durations"].get("ranks") or [{}]
            count = ranks[0].get("train", {}).get("stats", {}).get("count")
            return done if count == 200 else None

        result = wait_for(reported, timeout=120, interval=0.5)
        assert (
            result.stdout.strip()
            == f"reported (running, a snapshot): wrote {running_page} and running.json"
        )
        data = json.loads(running_page.with_suffix(".json").read_text())
        assert data["job"]["running"] is True and data["job"]["status"] == "InProgress"
        assert "running: a snapshot as of" in running_page.read_text()
        assert data["sections"]["step_durations"]["ranks"][0]["train"]["stats"]["count"] == 200
        release.touch()
        wait_for(
            lambda: describe("reported", home, **server.env())["TrainingJobStatus"] == "Completed",
            120,
        )
    finally:
        release.touch()
        server.stop()
    # No server runs now: the command starts an embedded one, which reads the finished job.
    done = subprocess.run(
        [*CLI, "report", "reported", "--no-open"], cwd=tmp_path, env=cli_env(home),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = tmp_path / "reported-profiler-report.html"
    assert done.stdout.strip() == f"reported (Completed): wrote {page} and {page.stem}.json"
    data = json.loads(page.with_suffix(".json").read_text())
    assert data["job"]["status"] == "Completed" and data["job"]["running"] is False
    # the CPU ran at 97 % on a CPU type: the advice is a larger one, with its numbers
    kinds = [item["kind"] for item in data["advice"]["items"]]
    assert kinds[:2] == ["larger_instance", "gpu_instance"]
    assert "ml.m5.xlarge" in page.read_text()
    # the job's cost advice rides along: billable seconds at the catalog's prices (on-demand job)
    cost = data["cost"]
    assert cost["TrainingJobName"] == "reported" and cost["EnableManagedSpotTraining"] is False
    assert cost["OnDemandCostUsd"] > cost["SpotCostUsd"] > 0 and cost["Interruptions"] == []
    assert "Cost and spot interruptions" in page.read_text()
    printed = trainops("report", "reported", "--json", home=home)
    assert printed.returncode == 0 and json.loads(printed.stdout)["job"]["name"] == "reported"


def test_unknown_job_and_job_without_profiler_data_fail_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unknown = trainops("report", "nope", "--no-open", home=home)
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [
        "trainops: error: no job named 'nope' or whose name starts with it"
    ]
    spec = write_job(tmp_path, "print('no profiling here')", job_name="plain")
    assert trainops("run", str(spec), home=home).returncode == 0
    bare = trainops("report", "plain", "--no-open", home=home)
    assert bare.returncode == 2
    (line,) = bare.stderr.splitlines()
    assert line.startswith("trainops: error: job 'plain' has no profiler data under file://")
    assert line.endswith("(profiler_config is off for this job)")
    assert not list(tmp_path.glob("*profiler-report*"))
