"""End to end: a job with a debugger_hook_config, run through the CLI and the embedded server,
finds SageMaker's debughookconfig.json, and the tensors its script writes are readable from the
debug-output prefix by a trial while the job still runs; the end marker comes at the end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e._harness import CLI, cli_env, describe, wait_for, write_job
from trainops._settings import Settings
from trainops.debugger import create_trial

pytestmark = pytest.mark.slow

SCRIPT = """
import json, os, time
import numpy as np
from trainops.debugger import CollectionManager, Collection, load_hook_config
from trainops.debugger.format import TensorFileWriter

config = load_hook_config()  # $SMDEBUG_CONFIG_FILE_PATH, as smdebug reads it
print("hook:", json.dumps(config.hook_parameters), config.include_collections(), flush=True)
writer = TensorFileWriter(config.local_path, "worker_0")
writer.write_collections(CollectionManager([Collection("losses", include_regex=["loss"])]))
for step in range(3):
    writer.write_step(step, "TRAIN", step, [("loss", np.array(1.0 / (step + 1)))])
while not os.path.exists(os.environ["RELEASE"]):
    time.sleep(0.05)
writer.write_step(3, "TRAIN", 3, [("loss", np.array(0.25))])
"""


def test_a_running_jobs_tensors_are_read_back_from_the_debug_output_prefix(
    tmp_path: Path,
) -> None:
    base, release = tmp_path / "debug", tmp_path / "release"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="dbg-job",
        rules=["loss_not_decreasing"],
        debugger_hook_config={
            "s3_output_path": base.as_uri(),
            "hook_parameters": {"save_interval": 1},
        },
        environment={"RELEASE": str(release)},
    )
    prefix = base / "dbg-job" / "debug-output"
    home = tmp_path / "home"
    command = [*CLI, "run", str(spec)]
    with subprocess.Popen(command, env=cli_env(home), stdout=subprocess.PIPE, text=True) as run:
        try:

            def three_steps() -> bool:
                if not (prefix / "index").is_dir():
                    return False
                return create_trial(prefix.as_uri()).steps() == [0, 1, 2]

            wait_for(three_steps, timeout=120, interval=0.5)
            assert run.poll() is None  # still running: the script waits for `release`
            assert not (prefix / "training_job_end.ts").exists()
        finally:
            release.touch()
            out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    assert 'hook: {"save_interval": "1"} [\'losses\']' in out
    trial = create_trial(prefix.as_uri())
    assert trial.steps() == [0, 1, 2, 3]
    assert float(trial.tensor("loss").value(3)) == 0.25
    assert (prefix / "training_job_end.ts").exists()
    by_name = create_trial("dbg-job", settings=Settings(home=home))
    assert by_name.steps() == [0, 1, 2, 3]
    found = describe("dbg-job", home)
    assert found["DebugOutputPath"] == prefix.as_uri()
    assert found["DebugHookConfig"]["CollectionConfigurations"] == [
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}}
    ]


HOSTILE = """
import os
from trainops.debugger import load_hook_config
local = load_hook_config().local_path
os.makedirs(os.path.join(local, "events", "000000000000"), exist_ok=True)
os.makedirs(os.path.join(local, "index", "000000000"), exist_ok=True)
event = os.path.join(local, "events", "000000000000", "000000000000_worker_0.tfevents")
os.symlink("/etc/passwd", event)                                  # a link to read through
os.mkfifo(os.path.join(local, "events", "fifo.tfevents"))           # would block a plain open
with open(os.path.join(local, "events", "huge.tfevents"), "wb") as f:
    f.truncate(3 << 30)                                             # 3 GiB (sparse)
os.symlink("/", os.path.join(local, "collections"))                 # a directory link
with open(os.path.join(local, "index", "000000000", "000000000000_worker_0.json"), "w") as f:
    f.write("{}")
with open(os.path.join(local, "training_job_end.ts"), "w") as f:
    f.write("forged")
"""


def test_a_hostile_tensors_directory_leaks_nothing_and_does_not_hang_the_job(
    tmp_path: Path,
) -> None:
    base = tmp_path / "debug"
    spec = write_job(
        tmp_path,
        HOSTILE,
        job_name="dbg-hostile",
        debugger_hook_config={"s3_output_path": base.as_uri()},
    )
    home = tmp_path / "home"
    result = subprocess.run(
        [*CLI, "run", str(spec)], env=cli_env(home), capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout + result.stderr
    prefix = base / "dbg-hostile" / "debug-output"
    uploaded = sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file())
    assert uploaded == ["training_job_end.ts"]  # no link, FIFO, huge file, nor the orphan index
    assert (prefix / "training_job_end.ts").read_bytes() == b""  # the agent's, not the script's
