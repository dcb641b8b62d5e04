"""Event files: the bytes are TensorBoard's, and TensorBoard's and TensorFlow's readers read them."""

from __future__ import annotations

import io
import math
import os
import re
import socket
import struct
from pathlib import Path

import pytest
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

from tests._support.system import require_extra
from tests.tensorboard._read import scalars, values
from trainops.data import tfrecord_frame
from trainops.tensorboard import (
    EventFileWriter,
    SummaryWriter,
    complete_length,
    file_version_event,
    scalar_event,
)


def _event(tag: str, value: float, step: int, wall_time: float) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()


@pytest.mark.parametrize(
    ("tag", "value", "step", "wall_time"),
    [
        ("loss", 0.25, 3, 1_700_000_000.5),
        ("train/accuracy", 0.0, 0, 1.0),  # zero step and value: proto3 rules for defaults
        ("\u00e9lan/\u03c3", -1e-3, 2**40, 0.0),  # UTF-8 tags
        ("x", 1e30, -5, 12.0),  # a negative step is a 10-byte varint
        ("", 3.5, 127, 99.0),
        ("t" * 300, 2.0, 128, 1.25),  # a tag longer than 127 bytes: two-byte length
    ],
)
def test_scalar_event_bytes_equal_protobufs_own(
    tag: str, value: float, step: int, wall_time: float
) -> None:
    assert scalar_event(tag, value, step, wall_time) == _event(tag, value, step, wall_time)


def test_a_double_beyond_float32_becomes_infinity_as_a_c_cast_makes_it() -> None:
    parsed = event_pb2.Event.FromString(scalar_event("big", -1e300, 1, 2.0))
    assert parsed.summary.value[0].simple_value == -math.inf


def test_file_version_event_bytes_equal_protobufs_own() -> None:
    expected = event_pb2.Event(wall_time=1234.5, file_version="brain.Event:2")
    assert file_version_event(1234.5) == expected.SerializeToString()


def test_framing_equals_tensorboards_record_writer(tmp_path: Path) -> None:
    writer = EventFileWriter(tmp_path, host="h")
    payloads = [scalar_event("a", float(i), i, 10.0 + i) for i in range(3)]
    for payload in payloads:
        writer.add_event(payload)
    writer.close()
    (path,) = writer.files
    expected = io.BytesIO()
    theirs = RecordWriter(expected)
    for payload in [file_version_event(_first_wall_time(path)), *payloads]:
        theirs.write(payload)
    assert path.read_bytes() == expected.getvalue()


def _first_wall_time(path: Path) -> float:
    (length,) = struct.unpack_from("<Q", path.read_bytes())
    return event_pb2.Event.FromString(path.read_bytes()[12 : 12 + length]).wall_time


def test_tensorboard_reads_the_scalars_tags_steps_and_wall_times(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as writer:
        for step in range(50):
            writer.add_scalar("loss", 1.0 / (step + 1), step, wall_time=1000.0 + step)
            if step % 10 == 0:
                writer.add_scalar("eval/accuracy", step / 100, step, wall_time=2000.0 + step)
    points = scalars(tmp_path)
    assert set(points) == {"loss", "eval/accuracy"}
    assert [s for s, _v, _w in points["loss"]] == list(range(50))
    assert values(points, "loss") == pytest.approx([1.0 / (s + 1) for s in range(50)], rel=1e-6)
    assert [w for _s, _v, w in points["loss"]] == [1000.0 + s for s in range(50)]
    assert points["eval/accuracy"] == [
        (s, pytest.approx(s / 100), 2000.0 + s) for s in range(0, 50, 10)
    ]


def test_the_first_event_is_the_file_version(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path)
    writer.add_scalar("loss", 1.0, 1)
    writer.close()
    (path,) = writer.file_writer.files
    events = list(event_file_loader.EventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [1]


def test_file_names_are_tensorflows(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path)
    writer.add_scalar("x", 1.0, 0)
    writer.close()
    (path,) = writer.file_writer.files
    match = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)", path.name)
    assert match is not None, path.name
    assert match.group(2) == socket.gethostname()
    assert int(match.group(3)) == os.getpid()


def test_files_rotate_by_size_and_tensorboard_reads_them_in_order(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path, max_bytes=400, flush_secs=0.0, host="algo-1")
    for step in range(100):
        writer.add_scalar("loss", float(step), step)
    writer.close()
    files = writer.file_writer.files
    assert len(files) > 5
    assert all(path.stat().st_size <= 400 + 64 for path in files)  # one record past the limit
    assert sorted(p.name for p in files) == [p.name for p in files]
    assert values(scalars(tmp_path), "loss") == [float(s) for s in range(100)]


def test_files_rotate_by_age(tmp_path: Path) -> None:
    writer = EventFileWriter(tmp_path, rotate_seconds=1e-9, flush_seconds=0.0)
    for step in range(3):
        writer.add_event(scalar_event("x", 1.0, step, 1.0))
    writer.close()
    assert len(writer.files) == 3


def test_nothing_reaches_the_file_before_a_flush_is_due(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path, flush_secs=3600)
    writer.add_scalar("x", 1.0, 0)
    assert list(tmp_path.iterdir()) == []
    writer.flush()
    assert values(scalars(tmp_path), "x") == [1.0]
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.add_scalar("x", 2.0, 1)


def test_default_directory_is_the_jobs_tensorboard_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINOPS_TENSORBOARD_DIR", str(tmp_path / "tb"))
    with SummaryWriter() as writer:
        writer.add_scalar("x", 1.0, 0)
    assert writer.log_dir == tmp_path / "tb"
    assert len(list((tmp_path / "tb").iterdir())) == 1


def test_a_file_cut_mid_record_is_read_up_to_its_last_whole_record(tmp_path: Path) -> None:
    full = tmp_path / "full"
    with SummaryWriter(full, host="h") as writer:
        for step in range(10):
            writer.add_scalar("loss", float(step), step)
    (path,) = writer.file_writer.files
    data = path.read_bytes()
    whole = complete_length(data)
    assert whole == len(data)
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    cut = data[: len(data) - 7]  # inside the last record's payload
    (cut_dir / path.name).write_bytes(cut)
    assert complete_length(cut) < len(cut)
    assert values(scalars(cut_dir), "loss") == [float(s) for s in range(9)]
    for end in range(len(data)):  # wherever the cut falls, whole records are exactly those before
        boundary = complete_length(data[:end])
        assert boundary <= end and complete_length(data[:boundary]) == boundary


def test_a_corrupt_length_stops_the_count_there() -> None:
    first = _record(scalar_event("a", 1.0, 1, 1.0))
    second = bytearray(_record(scalar_event("a", 2.0, 2, 1.0)))
    second[0] ^= 0xFF
    assert complete_length(first + bytes(second)) == len(first)


def _record(payload: bytes) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write(payload)
    return out.getvalue()


def test_tensorflow_reads_the_file(tmp_path: Path) -> None:
    tf = require_extra("tensorflow")
    with SummaryWriter(tmp_path) as writer:
        for step in range(5):
            writer.add_scalar("loss", step * 0.5, step)
    (path,) = writer.file_writer.files
    events = [event_pb2.Event.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, e.summary.value[0].simple_value) for e in events[1:]] == [
        (s, s * 0.5) for s in range(5)
    ]


# tbparse 0.0.9 calls pandas' sort_values(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_tbparse_reads_the_scalars(tmp_path: Path) -> None:
    tbparse = require_extra("dev", "tbparse")
    with SummaryWriter(tmp_path) as writer:
        for step in range(4):
            writer.add_scalar("loss", 4.0 - step, step)
    frame = tbparse.SummaryReader(str(tmp_path)).scalars
    assert list(frame["tag"]) == ["loss"] * 4
    assert list(frame["step"]) == [0, 1, 2, 3]
    assert list(frame["value"]) == [4.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize("first_step", [0, 1, 127, 16_383, 2**40])
@pytest.mark.parametrize("wall_time", [0.0, 1_700_000_000.25])
@pytest.mark.parametrize("tag", ["train:loss", "t" * 300])
def test_a_batch_of_scalars_has_the_bytes_of_one_call_a_point(
    tmp_path: Path, first_step: int, wall_time: float, tag: str
) -> None:
    points = [0.5, -1e300, 0.0, math.inf, math.nan, 2.0]
    batch, single = tmp_path / "batch", tmp_path / "single"
    with SummaryWriter(batch, file_name="a.tfevents") as writer:
        writer.add_scalars(tag, points, first_step, wall_time)
    with SummaryWriter(single, file_name="a.tfevents") as writer:
        for step, value in enumerate(points, first_step):
            writer.add_scalar(tag, value, step, wall_time)
    skip = len(tfrecord_frame(file_version_event(1.0)))  # the first events' wall times differ
    assert (batch / "a.tfevents").read_bytes()[skip:] == (single / "a.tfevents").read_bytes()[skip:]
