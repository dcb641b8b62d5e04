"""End to end: a single-host job is contained and named as on SageMaker, by default.

One host x two processes with ``MASTER_ADDR=algo-1`` forms a gloo world (as SageMaker's PyTorch
toolkit tests do): ``algo-1`` resolves on one host too. A script that hard-codes ``/opt/ml``
(its config files, its checkpoint directory) runs without ``mount_opt_ml`` in the spec, sees
only its host's processes and no server variable; opted out, a script failing on ``/opt/ml`` is
told to set ``mount_opt_ml: true``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job
from trainops.agent.supervision._hostns import namespaces_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not namespaces_available(), reason="this machine allows no namespaces"),
]

GLOO_ON_ALGO_1 = """
import os
import torch
import torch.distributed as dist
os.environ["MASTER_ADDR"] = "algo-1"
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
total = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(total)
print(f"rank {dist.get_rank()} sum {total.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_one_host_two_processes_form_a_gloo_world_on_algo_1(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    spec = write_job(
        tmp_path,
        GLOO_ON_ALGO_1,
        job_name="gloo-one-host",
        distribution={"processes_per_host": 2},
        stopping_condition={"max_runtime_in_seconds": 300},
    )
    result = trainops("run", str(spec), home=tmp_path / "home", timeout=360)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        assert f"[algo-1 rank {rank}] rank {rank} sum 3" in result.stdout


HARD_CODES_OPT_ML = """
import json, os, socket, sys
config = json.load(open("/opt/ml/input/config/resourceconfig.json"))
assert config["current_host"] == "algo-1" == socket.gethostname(), config
assert os.environ["SM_MODEL_DIR"] == "/opt/ml/model", os.environ["SM_MODEL_DIR"]
assert os.getcwd() == "/opt/ml/code", os.getcwd()
leaked = sorted(k for k in os.environ if k in ("TRAINOPS_HOME", "TRAINOPS_TOKEN", "TRAINOPS_SERVER"))
assert not leaked, leaked
os.makedirs("/opt/ml/checkpoints", exist_ok=True)
with open("/opt/ml/checkpoints/step-1.txt", "w") as f:
    f.write("spot")
pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
assert os.getpid() != 1 and 1 in pids and max(pids) < 100, pids  # its host's only
print(f"opt-ml by default ok, {len(pids)} processes", flush=True)
"""


def test_a_script_that_hard_codes_opt_ml_runs_unchanged(tmp_path: Path) -> None:
    remote = tmp_path / "checkpoints-remote"
    spec = write_job(
        tmp_path,
        HARD_CODES_OPT_ML,
        job_name="opt-ml-default",
        checkpoint={"uri": remote.as_uri(), "local_path": "/opt/ml/checkpoints"},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] opt-ml by default ok" in result.stdout
    assert (remote / "step-1.txt").read_text() == "spot"


def test_an_opted_out_script_failing_on_opt_ml_is_told_to_mount_it(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        'open("/opt/ml/input/config/hyperparameters.json").read()\n',
        job_name="opt-ml-off",
        mount_opt_ml=False,
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode != 0
    reason = describe("opt-ml-off", home)["FailureReason"]
    assert "FileNotFoundError" in reason and "set `mount_opt_ml: true`" in reason, reason
