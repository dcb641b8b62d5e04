"""The topology-aware DDP hook gives default DDP's gradients, on 2 hosts x 2 processes (gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainops.distributed import topology_aware_requested  # noqa: E402

WORKER = Path(__file__).with_name("_hook_worker.py")
HOSTS, PER_HOST = 2, 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank_env(rank: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_", "LOCAL_"))}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(HOSTS * PER_HOST),
        LOCAL_RANK=str(rank % PER_HOST),
        LOCAL_WORLD_SIZE=str(PER_HOST),
        NODE_RANK=str(rank // PER_HOST),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        GLOO_SOCKET_IFNAME="lo",
        OMP_NUM_THREADS="1",
    )
    return env


@pytest.mark.slow
def test_hook_gradients_equal_default_ddp(tmp_path: Path) -> None:
    port = _free_port()
    outs = [tmp_path / f"rank{r}.json" for r in range(HOSTS * PER_HOST)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out)],
            env=_rank_env(rank, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank, out in enumerate(outs)
    ]
    try:
        logs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * len(procs), "\n".join(logs)
    results = [json.loads(out.read_text()) for out in outs]
    assert all(r["buckets"] >= 1 for r in results), results  # the hook, not DDP, reduced
    assert max(r["max_abs_diff"] for r in results) < 1e-6
    # every rank ends with the same (mean) gradients, and they are not trivially zero
    assert len({round(r["hier_sum"], 5) for r in results}) == 1
    assert any(abs(r["flat_sum"]) > 1e-4 for r in results)


def test_the_spec_flag_turns_the_hook_on() -> None:
    on = {"SM_FRAMEWORK_PARAMS": '{"sagemaker_distributed_dataparallel_enabled": true}'}
    assert topology_aware_requested(on)
    assert not topology_aware_requested({"SM_FRAMEWORK_PARAMS": "{}"})
    assert not topology_aware_requested({"SM_FRAMEWORK_PARAMS": "not json"})
    assert not topology_aware_requested({})
