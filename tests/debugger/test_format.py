"""The on-disk format: smdebug's layout, every dtype round-trips, TensorBoard's protos parse it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainops.debugger import modes
from trainops.debugger.config import Collection, CollectionManager
from trainops.debugger.exceptions import DebugFormatError
from trainops.debugger.format import (
    TensorFileWriter,
    compute_reduction,
    decode_tensor,
    decode_tensor_event,
    encode_tensor,
    encode_tensor_event,
    mark_training_end,
    read_record,
    records,
    reduction_tensor_name,
    reverse_reduction_tensor_name,
    worker_name,
)
from trainops.debugger.format._wire import len_field, varint_field

DTYPES = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4)])
def test_every_dtype_and_shape_round_trips(dtype: str, shape: tuple[int, ...]) -> None:
    array = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    back = decode_tensor(memoryview(encode_tensor(array)))
    assert back.dtype == array.dtype and back.shape == shape
    np.testing.assert_array_equal(back, array)


def test_big_endian_input_is_written_little_endian() -> None:
    array = np.arange(5, dtype=">f4")
    np.testing.assert_array_equal(decode_tensor(memoryview(encode_tensor(array))), array)


def test_bfloat16_reads_back_as_float32() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    array = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    back = decode_tensor(memoryview(encode_tensor(array)))
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, [1.5, -2.0, 3.25])


def test_strings_round_trip() -> None:
    array = np.array(["a", "bé", ""])
    assert list(decode_tensor(memoryview(encode_tensor(array)))) == ["a", "bé", ""]


def test_strings_are_written_as_smdebug_writes_them_and_dt_string_reads_too() -> None:
    encoded = encode_tensor(np.array(["x"]))
    assert not encoded.startswith(b"\x08")  # no dtype field: DT_INVALID, as smdebug's
    dims = len_field(2, len_field(2, varint_field(1, 2)))
    tensorflows = varint_field(1, 7) + dims + len_field(8, b"p") + len_field(8, b"q")
    assert list(decode_tensor(memoryview(tensorflows))) == ["p", "q"]


def test_tensorboards_own_protos_parse_our_events() -> None:
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    tensor_util = pytest.importorskip("tensorboard.util.tensor_util")
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = encode_tensor_event("fc.weight", value, 12, modes.TRAIN, 4, 1700000000.5)
    event = event_pb2.Event.FromString(raw)
    assert event.step == 12 and event.wall_time == 1700000000.5
    summary_value = event.summary.value[0]
    assert summary_value.tag == "fc.weight"
    np.testing.assert_array_equal(tensor_util.make_ndarray(summary_value.tensor), value)
    # and the other way: TensorBoard's serializer, our decoder (TensorBoard's plugin_data is
    # singular, so its copy keeps the last plugin entry, the mode; the mode step falls back to
    # the step)
    (ours,) = decode_tensor_event(event.SerializeToString())
    assert (ours.step, ours.mode, ours.mode_step) == (12, modes.TRAIN, 12)
    np.testing.assert_array_equal(ours.value, value)


def test_writer_lays_out_files_as_smdebug(tmp_path: Path) -> None:
    writer = TensorFileWriter(tmp_path, worker_name())
    tensors = [("fc.weight", np.ones((2, 2), np.float32)), ("loss", np.float32(0.5))]
    writer.write_step(1234, modes.TRAIN, 1200, tensors, shapes=[("fc.weight", (2, 2))])
    writer.write_collections(CollectionManager([Collection("weights", ["fc.*"])]), num_workers=1)
    mark_training_end(tmp_path)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "collections/000000000/worker_0_collections.json",
        "events/000000001234/000000001234_worker_0.tfevents",
        "index/000000001/000000001234_worker_0.json",
        "training_job_end.ts",
    ]
    index = json.loads((tmp_path / files[2]).read_text())
    assert index["meta"] == {"mode": "TRAIN", "mode_step": 1200, "event_file_name": files[1]}
    assert [t["tensorname"] for t in index["tensor_payload"]] == ["fc.weight", "loss"]
    assert index["shape_payload"] == [
        {"tensorname": "fc.weight", "originalname": "fc.weight", "shape": [2, 2]}
    ]
    data = (tmp_path / files[1]).read_bytes()
    for entry, (offset, payload) in zip(index["tensor_payload"], records(data, "x"), strict=True):
        assert entry["start_idx"] == offset and entry["length"] == len(payload) + 16
    collections = json.loads((tmp_path / files[0]).read_text())
    assert collections["_meta"] == {"num_workers": 1}
    assert collections["collections"]["weights"]["include_regex"] == ["fc.*"]


def test_reduction_names_are_smdebugs() -> None:
    assert reduction_tensor_name("fc.weight", "max", False) == "smdebug/reductions/max/fc.weight"
    assert reduction_tensor_name("w:0", "l2", True) == "smdebug/reductions/abs_l2/w"
    assert reverse_reduction_tensor_name("smdebug/reductions/abs_mean/a/b") == ("a/b", "mean", True)
    assert reverse_reduction_tensor_name("fc.weight") is None


def test_reductions_compute_over_the_flat_tensor() -> None:
    array = np.array([[1.0, -2.0], [3.0, -4.0]])
    expected = {"min": -4, "max": 3, "mean": -0.5, "sum": -2, "prod": 24, "l1": 10}
    for name, value in expected.items():
        assert compute_reduction(array, name, False) == pytest.approx(value)
    assert compute_reduction(array, "l2", False) == pytest.approx(np.sqrt(30))
    assert compute_reduction(array, "max", True) == 4
    assert compute_reduction(array, "variance", False) == pytest.approx(np.var(array))
    with pytest.raises(ValueError, match="'median' is not one of"):
        compute_reduction(array, "median", False)
    with pytest.raises(ValueError, match="empty tensor"):
        compute_reduction(np.zeros(0), "min", False)


def test_a_corrupt_record_names_the_file_and_byte(tmp_path: Path) -> None:
    writer = TensorFileWriter(tmp_path, "worker_0", write_checksum=True)
    writer.write_step(0, modes.GLOBAL, 0, [("a", np.zeros(3)), ("b", np.ones(3))])
    data = bytearray((tmp_path / "events/000000000000/000000000000_worker_0.tfevents").read_bytes())
    first = len(read_record(data, 0, "f")) + 16
    data[first + 20] ^= 0xFF  # inside the second record's payload
    with pytest.raises(DebugFormatError, match=rf"^f: byte {first}: record data CRC mismatch$"):
        records(data, "f")
    data[first] ^= 0xFF  # its length field
    with pytest.raises(DebugFormatError, match=f"byte {first}: record length CRC mismatch"):
        read_record(data, first, "f")
    with pytest.raises(DebugFormatError, match=r"byte 0: record of .* cut short"):
        read_record(bytes(data[:30]), 0, "f")


def test_writer_refuses_hostile_worker_names(tmp_path: Path) -> None:
    for bad in ["../x", "a/b", "", ".hidden", "x" * 300]:
        with pytest.raises(ValueError, match="worker name"):
            TensorFileWriter(tmp_path, bad)
