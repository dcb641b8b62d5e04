"""The topology-aware DDP hook gives default DDP's gradients, on 2 hosts x 2 processes (gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.system import require_extra

torch = require_extra("torch")

from tests.distributed._ranks import run_ranks  # noqa: E402
from trainops.distributed import topology_aware_requested  # noqa: E402

WORKER = Path(__file__).with_name("_hook_worker.py")
HOSTS, PER_HOST = 2, 2


@pytest.mark.slow
def test_hook_gradients_equal_default_ddp(tmp_path: Path) -> None:
    results = run_ranks(WORKER, [], tmp_path, world=HOSTS * PER_HOST, per_host=PER_HOST)
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
