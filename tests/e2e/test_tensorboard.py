"""End to end: a job with metric definitions and a tensorboard_output_config, run through the
CLI and the embedded server, has its scalars in TensorBoard event files under the remote prefix
while it still runs, and all of them when it has ended."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e._harness import CLI, cli_env, describe, wait_for, write_job
from tests.tensorboard._read import scalars, values

pytestmark = pytest.mark.slow


SCRIPT = """
import os, time
from trainops.tensorboard import SummaryWriter
own = SummaryWriter(os.path.join(os.environ["TRAINOPS_TENSORBOARD_DIR"], "script"))
for epoch in range(3):
    print(f"epoch={epoch} train_loss={2.0 / (epoch + 1)}", flush=True)
    own.add_scalar("lr", 0.1 / (epoch + 1), epoch)
own.flush()
while not os.path.exists(os.environ["RELEASE"]):
    time.sleep(0.05)
print("epoch=3 train_loss=0.25", flush=True)
own.close()
"""


def test_a_running_job_has_its_scalars_in_the_remote_prefix(tmp_path: Path) -> None:
    remote = tmp_path / "tensorboard"
    release = tmp_path / "release"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="tb-job",
        metric_definitions=[{"name": "train:loss", "regex": "train_loss=([0-9.]+)"}],
        tensorboard_output_config={"s3_output_path": remote.as_uri()},
        environment={"RELEASE": str(release)},
    )
    home = tmp_path / "home"
    command = [*CLI, "run", str(spec)]
    with subprocess.Popen(command, env=cli_env(home), stdout=subprocess.PIPE, text=True) as run:
        try:

            def synced() -> bool:
                if not (remote / "trainops").is_dir() or not (remote / "script").is_dir():
                    return False
                ours, theirs = scalars(remote / "trainops"), scalars(remote / "script")
                return len(ours.get("train:loss", [])) == 3 and len(theirs.get("lr", [])) == 3

            wait_for(synced, timeout=120, interval=0.5)
            assert run.poll() is None  # still running: the script waits for `release`
        finally:
            release.touch()
            out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    ours = scalars(remote / "trainops")
    assert values(ours, "train:loss") == [2.0, 1.0, pytest.approx(2 / 3), 0.25]
    assert values(scalars(remote / "script"), "lr") == pytest.approx([0.1, 0.05, 0.1 / 3])
    artifacts = {a["Name"]: a["Uri"] for a in describe("tb-job", home)["Artifacts"]}
    assert artifacts["tensorboard"] == remote.as_uri()
