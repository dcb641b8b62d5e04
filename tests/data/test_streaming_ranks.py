"""StreamingDataset split by rank and by DataLoader worker: complete, no duplicates, equal.

Ranks are simulated with RANK / WORLD_SIZE (as torchrun sets them), workers are real DataLoader
worker processes, and one test runs a real two-process gloo group.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch.utils.data

from tests.data._streams import ids, make_dataset
from trainops.data import PlacementError, StreamingDataset

COUNTS = [31, 17, 0, 44, 9, 26, 38]
TOTAL = sum(COUNTS)  # 165: not a multiple of 2, 4 or 7


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    make_dataset(tmp_path / "ds", COUNTS)
    return tmp_path / "ds"


def _rank_ids(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    world: int,
    *,
    workers: int = 0,
    **options: object,
) -> list[list[int]]:
    out = []
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        dataset = StreamingDataset(folder, seed=11, **options)  # type: ignore[arg-type]
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, num_workers=workers, collate_fn=lambda b: b
        )
        out.append(ids(loader))
    return out


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
def test_ranks_get_equal_counts_and_together_every_record(
    folder: Path, monkeypatch: pytest.MonkeyPatch, world: int
) -> None:
    per_rank = _rank_ids(folder, monkeypatch, world, batch_size=8)
    length = -(-TOTAL // world)
    assert [len(r) for r in per_rank] == [length] * world
    counts = Counter(g for r in per_rank for g in r)
    assert set(counts) == set(range(TOTAL))
    # Padding repeats fewer than `world` records, as DistributedSampler does.
    assert sum(counts.values()) - TOTAL == world * length - TOTAL < world


@pytest.mark.parametrize("world", [2, 4, 7])
def test_drop_last_leaves_out_the_remainder_and_repeats_nothing(
    folder: Path, monkeypatch: pytest.MonkeyPatch, world: int
) -> None:
    per_rank = _rank_ids(folder, monkeypatch, world, batch_size=8, drop_last=True)
    assert [len(r) for r in per_rank] == [TOTAL // world] * world
    flat = [g for r in per_rank for g in r]
    assert len(flat) == len(set(flat)) == TOTAL - TOTAL % world


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # 3 on 2 cores
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_take_turns_so_the_loop_sees_the_same_sequence(
    folder: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    alone = _rank_ids(folder, monkeypatch, 2, batch_size=8)
    shared = _rank_ids(folder, monkeypatch, 2, workers=workers, batch_size=8)
    assert shared == alone


@pytest.mark.slow
def test_records_one_by_one_across_workers_are_complete(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_rank = _rank_ids(folder, monkeypatch, 3, workers=2, drop_last=True)
    flat = [g for r in per_rank for g in r]
    assert len(flat) == len(set(flat)) == TOTAL - TOTAL % 3


def test_ranks_change_records_between_epochs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    dataset = StreamingDataset(folder, seed=2)
    first, second = set(ids(dataset)), set(ids(dataset))
    assert first != second


@pytest.mark.parametrize(
    ("rank", "world", "message"),
    [
        ("x", "2", "RANK='x'"),
        ("2", "2", "RANK=2 is not a rank of WORLD_SIZE=2"),
        ("0", "0", "WORLD_SIZE=0"),
    ],
)
def test_a_bad_rank_environment_is_named(
    folder: Path, monkeypatch: pytest.MonkeyPatch, rank: str, world: str, message: str
) -> None:
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    with pytest.raises(PlacementError, match=message):
        list(StreamingDataset(folder))


GLOO_RANK = """
import sys, torch.distributed as dist
from tests.data._streams import ids
from trainops.data import StreamingDataset
rank, init = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
# RANK/WORLD_SIZE say otherwise: the initialised group is what counts.
print(" ".join(map(str, ids(StreamingDataset(sys.argv[3], seed=4, batch_size=5)))))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_an_initialised_process_group_gives_the_rank(folder: Path, tmp_path: Path) -> None:
    init = f"file://{tmp_path / 'rendezvous'}"
    env = {"RANK": "0", "WORLD_SIZE": "1", "PYTHONPATH": ":".join(sys.path)}
    env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback: no dependence on the host name resolving
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GLOO_RANK, str(rank), init, str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in range(2)
    ]
    done = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in done]
    outs = [out for out, _ in done]
    per_rank = [[int(g) for g in out.split()] for out in outs]
    assert [len(r) for r in per_rank] == [-(-TOTAL // 2)] * 2
    assert set(per_rank[0]) | set(per_rank[1]) == set(range(TOTAL))
