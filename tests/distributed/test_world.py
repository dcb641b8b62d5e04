"""World from the environment each launcher sets, and the data-parallel helpers (no torch)."""

from __future__ import annotations

import io

import pytest

from trainops.distributed import (
    DistributedError,
    ThroughputMeter,
    World,
    cpu_share,
    global_batch_size,
    per_process_batch_size,
    rank_zero_only,
    scale_learning_rate,
    shard,
)

TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "MASTER_ADDR": "algo-1",
    "MASTER_PORT": "29400",
}
OPENMPI = {
    "OMPI_COMM_WORLD_RANK": "2",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "SM_HOSTS": '["algo-1","algo-2"]',
}


def test_torchrun_variables() -> None:
    world = World.from_env(TORCHRUN)
    assert world == World(3, 4, 1, 2, 1, 2, "algo-1", 29400)
    assert not world.is_main and not world.is_local_main and world.host_ranks() == [2, 3]


def test_openmpi_variables_and_the_sagemaker_master() -> None:
    world = World.from_env(OPENMPI)
    assert (world.rank, world.node_rank, world.num_nodes) == (2, 1, 2)
    assert (world.master_addr, world.master_port) == ("algo-1", 7777)


def test_a_script_run_by_hand_is_a_world_of_one() -> None:
    world = World.from_env({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"})
    assert world.world_size == 1 and world.is_main and not world.distributed


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "x"}, "RANK='x' is not an integer"),
        ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK=4 is outside WORLD_SIZE=4"),
        ({"WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "2"}, "not a multiple of LOCAL_WORLD_SIZE=2"),
        ({"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=2 is outside"),
        ({"SM_HOSTS": "algo-1"}, "SM_HOSTS='algo-1' is not a JSON list"),
    ],
)
def test_contradictions_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(DistributedError, match=message):
        World.from_env(env)


def test_scaling_rules() -> None:
    world = World.from_env(TORCHRUN)
    assert scale_learning_rate(0.1, world) == pytest.approx(0.4)
    assert scale_learning_rate(0.1, world, rule="sqrt") == pytest.approx(0.2)
    assert global_batch_size(32, world) == 128
    assert per_process_batch_size(128, world) == 32
    with pytest.raises(DistributedError, match="does not divide among 4"):
        per_process_batch_size(130, world)
    with pytest.raises(ValueError, match="'cubic'"):
        scale_learning_rate(0.1, world, rule="cubic")


def test_shards_partition_the_data() -> None:
    data = list(range(10))
    shards = [shard(data, World(r, 4, r % 2, 2, r // 2, 2, "a", 1)) for r in range(4)]
    assert sorted(x for s in shards for x in s) == data
    assert shards[1] == [1, 5, 9]


def test_cpu_shares_do_not_overlap_on_a_host() -> None:
    shares = [cpu_share(World(r, 4, r, 4, 0, 1, "a", 1), list(range(8))) for r in range(4)]
    assert shares == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_rank_zero_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    save = rank_zero_only(lambda: calls.append(1) or "saved")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert save() is None
    monkeypatch.setenv("RANK", "0")
    assert save() == "saved" and calls == [1]


def test_throughput_meter_prints_a_scrapable_rate() -> None:
    ticks = iter([0.0, 5.0, 10.0, 10.0])
    out = io.StringIO()
    meter = ThroughputMeter(10.0, stream=out, clock=lambda: next(ticks))
    assert meter.step(100) is None
    assert meter.step(100) == pytest.approx(20.0)
    assert out.getvalue() == "samples_per_sec=20.00\n"
    assert meter.overall() == pytest.approx(20.0)
