"""Model parallelism agrees with one-process training: pipelines (GPipe, 1F1B, with replicas)
and FSDP2 sharding (full and hybrid), on CPU with gloo; and the stage split is balanced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.distributed._ranks import run_ranks
from trainops.distributed import DistributedError, ParallelLayout, World, balanced_cuts

WORKER = Path(__file__).with_name("_parallel_worker.py")


def test_cuts_balance_the_heaviest_stage() -> None:
    assert balanced_cuts([1, 1, 1, 1], 2) == [2]
    assert balanced_cuts([10, 1, 1, 1, 1], 2) == [1]
    assert balanced_cuts([1, 2, 3, 4, 5, 6], 3) == [3, 5]  # 6 | 4+5=9 | 6: heaviest 9
    with pytest.raises(DistributedError, match="cannot split 2 modules into 3 stages"):
        balanced_cuts([1, 1], 3)


def test_split_model_by_parameters_and_by_names() -> None:
    torch = require_extra("torch")
    from trainops.distributed import split_model

    model = torch.nn.Sequential(
        torch.nn.Linear(100, 100), torch.nn.ReLU(), torch.nn.Linear(100, 10), torch.nn.Linear(10, 10)
    )  # fmt: skip
    first, second = split_model(model, 2)
    assert [type(m).__name__ for m in first] == ["Linear"]
    assert len(second) == 3
    named = split_model(model, 2, split_points=["2"])
    assert [len(stage) for stage in named] == [2, 2]
    timed = split_model(model, 2, by="time", sample=torch.randn(4, 100))
    assert sum(len(stage) for stage in timed) == 4
    with pytest.raises(DistributedError, match="split point 'nope'"):
        split_model(model, 2, split_points=["nope"])


def test_layout_from_the_jobs_parameters() -> None:
    world = World(5, 8, 1, 4, 1, 2, "algo-1", 7777)
    env = {"SM_HP_MP_PARAMETERS": json.dumps({"partitions": 2, "microbatches": 4})}
    layout = ParallelLayout.from_env(world, env)
    assert (layout.pipeline, layout.data, layout.stage, layout.microbatches) == (2, 4, 1, 4)
    assert layout.pipeline_ranks(2) == [4, 5] and layout.replica_ranks(1) == [1, 3, 5, 7]
    with pytest.raises(DistributedError, match="does not divide the world size 8"):
        ParallelLayout(world, pipeline=3)
    with pytest.raises(DistributedError, match="'zigzag'"):
        ParallelLayout(world, schedule="zigzag")


def _run(tmp_path: Path, mode: str, world: int, parameters: dict[str, Any]) -> list[float]:
    extra = {"SM_HP_MP_PARAMETERS": json.dumps(parameters)}
    results = run_ranks(WORKER, [mode], tmp_path, world=world, per_host=world, extra_env=extra)
    return [r["max_abs_diff"] for r in results]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("world", "parameters"),
    [
        (2, {"pipeline_parallel_degree": 2, "microbatches": 4, "pipeline": "simple"}),
        (2, {"pipeline_parallel_degree": 2, "microbatches": 4, "pipeline": "interleaved"}),
        (4, {"pipeline_parallel_degree": 2, "microbatches": 2}),  # 2 stages x 2 replicas
    ],
    ids=["gpipe", "1f1b", "pipeline-x-replicas"],
)
def test_pipelines_train_like_one_process(
    tmp_path: Path, world: int, parameters: dict[str, Any]
) -> None:
    require_extra("torch")
    assert max(_run(tmp_path, "pipeline", world, parameters)) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("world", "degree"), [(2, 2), (4, 2)], ids=["fully-sharded", "hybrid-sharded"]
)
def test_sharded_training_matches_one_process(tmp_path: Path, world: int, degree: int) -> None:
    require_extra("torch")
    diffs = _run(tmp_path, "shard", world, {"sharded_data_parallel_degree": degree})
    assert max(diffs) < 1e-5
