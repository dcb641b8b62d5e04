"""End to end: a rule's command action runs on the job's own host, and after the end on the
control plane.

The script writes its step timings (a slow step in 25) until a file appears in its
working directory, then many more. Rule ``on-host`` (StepOutlier, scanned every tick, three
outliers) fires while the job runs: its command is sent to algo-1's agent, which runs it in the
host's namespaces with the job's environment; it writes what it sees into the script's working
directory, and the script prints that and its own namespaces. Rule ``after-end`` (50
outliers, scanned once at the start and then only at the end) can only fire on the data
written after that file appeared, at the job's end, when no host is left: the control plane
runs its command with the job's recorded environment, and its result says so.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._harness import describe, trainops, write_job
from trainops.agent.supervision._hostns import namespaces_available

pytestmark = pytest.mark.slow

SCRIPT = """
import json, os, sys, time
from pathlib import Path
from trainops.profiler import MODE_TRAIN, SeriesWriter

prefix = Path(sys.argv[sys.argv.index("--profiler-dir") + 1])
writer = SeriesWriter(
    prefix / "framework/steps/algo-1/rank-0",
    {"kind": "steps", "host": "algo-1", "rank": 0},
    ["time", "step", "mode", "duration"],
    prefix="script-",
    rotate_rows=20,
)
seen = Path("action-saw.json")
step = 0
def write(count):
    global step
    for _ in range(count):
        writer.append([time.time(), step, MODE_TRAIN, 1.0 if step % 25 == 24 else 0.1])
        step += 1
write(200)  # 8 outliers: enough for on-host, never for after-end
deadline = time.monotonic() + 180
while not seen.exists() and time.monotonic() < deadline:
    time.sleep(0.2)
write(2000)  # 80 more: after-end finds them in its final scan
writer.close()
mine = {
    "mnt": os.stat("/proc/self/ns/mnt").st_ino,
    "pid": os.readlink("/proc/self/ns/pid"),
}
print("SCRIPT " + json.dumps(mine), flush=True)
print("ACTION " + (seen.read_text() if seen.exists() else "null"), flush=True)
"""

# What a command sees: its namespaces, its environment, whether the home is visible.
REPORT = """
import json, os, sys
finding = json.load(sys.stdin)
seen = {
    "mnt": os.stat("/proc/self/ns/mnt").st_ino,
    "pid": os.readlink("/proc/self/ns/pid"),
    "env": {k: v for k, v in os.environ.items()},
    "home_visible": os.path.exists(sys.argv[2]),
    "rule": finding["rule_name"],
    "cwd": os.getcwd(),
}
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    json.dump(seen, f)
os.replace(tmp, sys.argv[1])
print("reported", flush=True)
"""

SERVER_TOKEN = "server-token-4f1c9e"
SERVER_SECRET = "server-cloud-secret-77ab"


def _line(stdout: str, tag: str) -> Any:
    for line in stdout.splitlines():
        if line.startswith(f"[algo-1] {tag} "):
            return json.loads(line.split(" ", 2)[2])
    raise AssertionError(f"no {tag} line in:\n{stdout}")


def _actions(name: str, home: Path, rule: str) -> list[dict[str, Any]]:
    """The rule's recorded actions, once they are recorded (they follow its verdict)."""
    deadline = time.monotonic() + 60
    while True:
        job = describe(name, home)
        statuses = {s["RuleConfigurationName"]: s for s in job["ProfilerRuleEvaluationStatuses"]}
        actions: list[dict[str, Any]] = statuses[rule].get("Evaluation", {}).get("Actions") or []
        if actions or time.monotonic() > deadline:
            return actions
        time.sleep(0.2)


def test_a_command_action_runs_on_the_jobs_host_and_after_the_end_on_the_control_plane(
    tmp_path: Path,
) -> None:
    profiler_dir = tmp_path / "profiler"
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.yaml"
    config.write_text("webhook_networks: []\n")
    late = tmp_path / "after-end.json"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="hostaction",
        hyperparameters={"profiler-dir": str(profiler_dir)},
        profiler_config={"s3_output_path": profiler_dir.as_uri()},
        environment={"JOB_FLAG": "from-the-spec"},
        rules=[
            {
                "name": "on-host",
                "rule": "StepOutlier",
                "rule_parameters": {"scan_interval_us": 0, "n_outliers": 3},
                "actions": [
                    {"command": [sys.executable, "-c", REPORT, "action-saw.json", str(config)]}
                ],
            },
            {
                "name": "after-end",
                "rule": "StepOutlier",
                "rule_parameters": {"scan_interval_us": 10**12, "n_outliers": 50},
                "actions": [{"command": [sys.executable, "-c", REPORT, str(late), str(config)]}],
            },
        ],
    )
    run = trainops(
        "run",
        str(spec),
        home=home,
        timeout=300,
        TRAINOPS_TOKEN=SERVER_TOKEN,
        AWS_SECRET_ACCESS_KEY=SERVER_SECRET,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    script, action = _line(run.stdout, "SCRIPT"), _line(run.stdout, "ACTION")
    assert action is not None, run.stdout

    # On the host: the job's environment, none of the server's, the home hidden.
    env = action["env"]
    assert env["JOB_FLAG"] == "from-the-spec" and env["SM_CURRENT_HOST"] == "algo-1"
    assert env["TRAINOPS_RULE"] == "on-host" and env["TRAINOPS_JOB"] == "hostaction"
    assert action["rule"] == "on-host"
    assert "TRAINOPS_TOKEN" not in env and "TRAINOPS_HOME" not in env
    assert SERVER_TOKEN not in json.dumps(action)
    if namespaces_available():  # the job's own namespaces, not the server's
        assert (action["mnt"], action["pid"]) == (script["mnt"], script["pid"])
        assert action["mnt"] != os.stat("/proc/self/ns/mnt").st_ino
        assert not action["home_visible"]
    on_host = _actions("hostaction", home, "on-host")
    assert [(a["Type"], a["Ok"]) for a in on_host] == [("command", True)], on_host
    assert on_host[0]["Detail"].endswith("exited with 0 on algo-1: reported"), on_host

    # After the end: the control plane ran it, with the job's recorded environment only.
    after = _actions("hostaction", home, "after-end")
    assert [(a["Type"], a["Ok"]) for a in after] == [("command", True)], after
    assert "run by the control plane with the job's recorded environment: " in after[0]["Detail"]
    assert "the job's hosts have ended" in after[0]["Detail"]
    seen = json.loads(late.read_text())
    assert seen["rule"] == "after-end" and seen["env"]["JOB_FLAG"] == "from-the-spec"
    assert seen["mnt"] == os.stat("/proc/self/ns/mnt").st_ino  # the control plane's machine
    assert "TRAINOPS_TOKEN" not in seen["env"] and "TRAINOPS_HOME" not in seen["env"]
    assert SERVER_SECRET not in json.dumps(seen)
