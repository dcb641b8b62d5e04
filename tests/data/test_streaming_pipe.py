"""StreamingDataset on a Pipe channel: shards through real FIFOs, raw or RecordIO-wrapped."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest
import torch.utils.data

from tests.data._streams import FifoWriter, ids, make_dataset, pipe_env
from trainops.data import CorruptRecordError, StreamingDataset, recordio_frame
from trainops.data.streaming._shuffle import Windows

COUNTS = [20, 35, 0, 12, 28]
ORDER = [3, 0, 4, 1, 2]  # the order the agent streams the shards in (its shuffle)


@pytest.fixture
def shards(tmp_path: Path) -> list[bytes]:
    make_dataset(tmp_path / "ds", COUNTS)
    return [(tmp_path / "ds" / f"part-{k:05d}.tops").read_bytes() for k in range(len(COUNTS))]


def _job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **entry: str) -> Path:
    for name, value in pipe_env(tmp_path / "opt-ml", "train", **entry).items():
        monkeypatch.setenv(name, value)
    return tmp_path / "opt-ml" / "input" / "data"


def _sequence() -> list[int]:
    """Global ids in stream order: the shards in ORDER, each shard's records in order."""
    starts = list(itertools.accumulate(COUNTS, initial=0))
    return [g for k in ORDER for g in range(starts[k], starts[k + 1])]


def _serve(folder: Path, epochs: list[bytes]) -> FifoWriter:
    writer = FifoWriter(folder, "train", epochs)
    writer.start()
    return writer


def _done(writer: FifoWriter) -> None:
    writer.join(timeout=30)
    assert not writer.is_alive() and writer.error is None


def test_raw_shards_come_in_stream_order_without_shuffle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    stream = b"".join(shards[k] for k in ORDER)
    writer = _serve(folder, [stream, stream])
    dataset = StreamingDataset.from_channel("train", batch_size=8, shuffle=False)
    assert ids(dataset) == _sequence() == ids(dataset)
    _done(writer)


def test_windows_of_the_stream_are_shuffled_as_for_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    writer = _serve(folder, [b"".join(shards[k] for k in ORDER)])
    seen = ids(StreamingDataset.from_channel("train", batch_size=8, seed=4, shuffle_window=16))
    windows = Windows(16, (4, 0, 0, "records"), shuffle=True)
    sequence = _sequence()
    assert seen == [sequence[windows.source(q, len(sequence))] for q in range(len(sequence))]
    assert seen != sequence
    _done(writer)


def test_wrapped_objects_that_are_not_shards_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch, RecordWrapperType="RecordIO")
    index = (tmp_path / "ds" / "index.json").read_bytes()
    objects = [index, *(shards[k] for k in ORDER), b"0\t1\tcats/1.jpg\n"]
    writer = _serve(folder, [b"".join(map(recordio_frame, objects))])
    assert ids(StreamingDataset.from_channel("train", shuffle=False)) == _sequence()
    _done(writer)


def test_resuming_mid_epoch_passes_over_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    stream = b"".join(shards[k] for k in ORDER)
    writer = _serve(folder, [stream, stream, stream])
    options = {"batch_size": 6, "seed": 2, "shuffle_window": 10}
    expected = ids(StreamingDataset.from_channel("train", **options))
    first = StreamingDataset.from_channel("train", **options)
    taken = ids(itertools.islice(iter(first), 7))
    resumed = StreamingDataset.from_channel("train", **options)
    resumed.load_state_dict(first.state_dict())
    assert taken + ids(resumed) == expected
    _done(writer)


def test_one_dataloader_worker_reads_the_channel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    writer = _serve(folder, [b"".join(shards[k] for k in ORDER)])
    dataset = StreamingDataset.from_channel("train", batch_size=5, shuffle=False)
    assert ids(dataset.loader(num_workers=1)) == _sequence()
    _done(writer)


def test_several_readers_of_one_pipe_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _job(tmp_path, monkeypatch)
    dataset = StreamingDataset.from_channel("train", batch_size=5)
    as_torch: torch.utils.data.IterableDataset[object] = dataset  # type: ignore[assignment]
    batches = iter(torch.utils.data.DataLoader(as_torch, batch_size=None, num_workers=2))
    with pytest.raises(ValueError, match="num_workers 0 or 1") as refused:
        next(batches)
    # Its workers ended now, not whenever the garbage collector meets the cycle the traceback
    # makes (a collected DataLoader iterator waits 5 s for a worker: seen as a 10 s stall of
    # whichever later test the collection fell in).
    refused.value.__traceback__ = None
    del refused, batches
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE=2"):
        list(dataset)
    with pytest.raises(TypeError, match="only known at the end"):
        len(dataset)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: s[: len(s) - 9], r"epoch 0: corrupt record at byte \d+: truncated"),
        (lambda s: s[:20], r"byte \d+: truncated: 20 bytes of a header"),
        (lambda s: b'{"format": "trainops-shards"}' + b" " * 40, "not a trainops shard"),
        (lambda s: s[:24] + struct.pack("<Q", 1 << 62) + s[32:], "outside 33..1073741824"),
        (lambda s: s[:32] + struct.pack("<Q", 1) + s[40:], r"corrupt record at byte \d+:"),
    ],
)
def test_a_damaged_stream_names_channel_epoch_and_offset(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shards: list[bytes],
    damage: object,
    message: str,
) -> None:
    folder = _job(tmp_path, monkeypatch)
    last = damage(shards[4])  # type: ignore[operator]
    writer = _serve(folder, [shards[0] + last])
    with pytest.raises(CorruptRecordError, match=rf"channel train, .*{message}"):
        list(StreamingDataset.from_channel("train", shuffle=False))
    _done(writer)


def test_a_damaged_shard_is_placed_in_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    bad = shards[4][:32] + struct.pack("<Q", 1) + shards[4][40:]  # record 0 starts at 1
    writer = _serve(folder, [shards[0] + bad])
    with pytest.raises(CorruptRecordError, match=rf"at byte {len(shards[0]) + 32}: record 0"):
        list(StreamingDataset.from_channel("train", shuffle=False))
    _done(writer)


def test_a_file_mode_channel_reads_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    env = pipe_env(tmp_path / "opt-ml", "train", mode="File")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SM_CHANNEL_TRAIN", str(tmp_path / "ds"))
    assert ids(StreamingDataset.from_channel("train", shuffle=False)) == list(range(sum(COUNTS)))


def test_by_default_a_pipe_window_holds_256_mib_of_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[bytes]
) -> None:
    folder = _job(tmp_path, monkeypatch)
    writer = _serve(folder, [b"".join(shards[k] for k in ORDER)])
    seen = ids(StreamingDataset.from_channel("train", seed=4))
    # Records of ~20 bytes: 256 MiB would be millions, so the cap of 262,144 applies.
    windows = Windows(1 << 18, (4, 0, 0, "records"), shuffle=True)
    sequence = _sequence()
    assert seen == [sequence[windows.source(q, len(sequence))] for q in range(len(sequence))]
    _done(writer)
