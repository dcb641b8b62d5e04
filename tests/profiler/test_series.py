"""The profiler's chunk container (TSC1) and its reader, against good and hostile bytes.

Chunks are written by a job's own processes and read by the control plane (rules, report), so
every damaged or hostile chunk must be one clear error naming where and at which byte, never a
traceback, and never a large allocation."""

from __future__ import annotations

import json
import math
import struct
import zlib
from pathlib import Path

import pytest

from trainops._settings import Settings
from trainops.profiler import (
    ChunkError,
    ProfilerReader,
    SeriesKey,
    SeriesWriter,
    decode_chunk,
    encode_chunk,
    merge_chunks,
)
from trainops.profiler._reader import MAX_CHUNK_BYTES
from trainops.storage import store_for

HEADER = {"kind": "system", "host": "algo-1", "columns": ["time", "cpu"]}


def _chunk(rows: list[tuple[float, ...]] | None = None) -> bytes:
    return encode_chunk(HEADER, rows or [(1.0, 10.0), (2.0, 20.0)])


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_round_trip_and_merge_across_column_changes() -> None:
    first = decode_chunk(_chunk([(2.0, 20.0), (1.0, 10.0)]))
    later = decode_chunk(
        encode_chunk({**HEADER, "columns": ["time", "cpu", "gpu0"]}, [(3.0, 30.0, 99.0)])
    )
    merged = merge_chunks([later, first])
    assert merged.columns == ["time", "cpu", "gpu0"]
    assert merged.times == [1.0, 2.0, 3.0]
    assert merged.column("cpu") == [10.0, 20.0, 30.0]
    gpu = merged.column("gpu0")
    assert math.isnan(gpu[0]) and math.isnan(gpu[1]) and gpu[2] == 99.0
    assert merged.column("nope") == []


def test_encode_refuses_bad_rows() -> None:
    with pytest.raises(ValueError, match="first name is 'time'"):
        encode_chunk({"columns": ["cpu"]}, [])
    with pytest.raises(ValueError, match="row 1 has 1 values for 2 columns"):
        encode_chunk(HEADER, [(1.0, 2.0), (3.0,)])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b"XXXX" + b[4:], "no TSC1 magic at byte 0"),
        (lambda b: b[:10], "no TSC1 magic at byte 0"),
        (lambda b: b[:-5] + bytes([b[-5] ^ 1]) + b[-4:], "checksum mismatch"),
        (lambda b: b[:-4], "checksum mismatch"),
        (lambda b: _with_crc(b[:4] + struct.pack("<I", 1 << 30) + b[8:-4]), "header length"),
        (lambda b: _with_crc(b[:8] + b"{" * 5 + b[13:-4]), "header at byte 8 is not JSON"),
    ],
)
def test_damaged_chunks_are_named_with_the_byte(damage: object, message: str) -> None:
    data = damage(_chunk())  # type: ignore[operator]
    with pytest.raises(ChunkError, match=message) as caught:
        decode_chunk(data, "s3://b/profiler/system/algo-1/1-000000.tsc")
    assert str(caught.value).startswith("s3://b/profiler/system/algo-1/1-000000.tsc: ")


def _forged(rows: int, columns: int, body: bytes) -> bytes:
    head = json.dumps({"columns": ["time"] + [f"c{i}" for i in range(columns - 1)]}).encode()
    out = b"TSC1" + struct.pack("<I", len(head)) + head + struct.pack("<II", rows, len(body)) + body
    return _with_crc(out)


def test_a_compression_bomb_is_refused_before_inflating() -> None:
    # 1 GiB of zeros claimed (2^27 cells), compressed to about a megabyte.
    bomb = zlib.compress(bytes(1 << 24), 9)
    with pytest.raises(ChunkError, match="does not fit"):
        decode_chunk(_forged(1 << 26, 2, bomb))


def test_a_body_that_inflates_to_more_than_it_claims_is_refused() -> None:
    body = zlib.compress(bytes(8 * 2 * 100))  # 100 rows of 2 columns' worth
    with pytest.raises(ChunkError, match="holds 161 bytes of values, not 160"):
        decode_chunk(_forged(10, 2, body))
    with pytest.raises(ChunkError, match="does not inflate"):
        decode_chunk(_forged(1, 2, b"not zlib at all"))


def test_the_writer_renames_whole_chunks_into_place(tmp_path: Path) -> None:
    writer = SeriesWriter(tmp_path, {"kind": "system"}, ["time", "cpu"], prefix="1-", rotate_rows=2)
    assert writer.append((1.0, 1.0)) is None
    first = writer.append((2.0, 2.0))
    writer.append((3.0, 3.0))
    last = writer.close()
    assert first is not None and last is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1-000000.tsc", "1-000001.tsc"]
    assert decode_chunk(last.read_bytes()).rows == [(3.0, 3.0)]


def test_the_reader_skips_what_it_cannot_use_and_names_it(tmp_path: Path) -> None:
    prefix = tmp_path / "profiler"
    good = prefix / "system" / "algo-1"
    good.mkdir(parents=True)
    (good / "1-000000.tsc").write_bytes(_chunk())
    (good / "1-000001.tsc").write_bytes(b"TSC1 but nothing else of a chunk")
    (good / ".1-000002.tsc.tmp").write_bytes(b"half written")
    with open(good / "1-000003.tsc", "wb") as huge:  # sparse: no disk used
        huge.truncate(MAX_CHUNK_BYTES + 1)
    (prefix / "meta").mkdir()
    (prefix / "meta" / "algo-1.json").write_text("[1, 2]")
    (prefix / "meta" / "algo-2.json").write_bytes(b" " * ((1 << 20) + 1))
    with open(prefix / "meta" / "algo-3.json", "wb") as sparse:  # 1 GiB, no disk used
        sparse.truncate(1 << 30)
    (prefix / "meta" / "algo-4.json").write_text("[" * 100_000)  # past the decoder's recursion
    uri = prefix.as_uri()
    reader = ProfilerReader(store_for(uri, Settings(home=tmp_path / "home")), uri)
    assert reader.refresh()
    assert reader.series[SeriesKey("system", "algo-1")].times == [1.0, 2.0]
    problems = "\n".join(reader.errors)
    assert "1-000001.tsc: checksum mismatch" in problems
    assert f"1-000003.tsc: {MAX_CHUNK_BYTES + 1} bytes, more than a chunk may hold" in problems
    assert "algo-1.json: not a JSON object" in problems
    assert f"algo-2.json: {(1 << 20) + 1} bytes, more than a meta file may hold" in problems
    assert f"algo-3.json: {1 << 30} bytes, more than a meta file may hold" in problems
    assert "algo-4.json: maximum recursion depth exceeded" in problems
    assert reader.meta == {}
    assert not reader.refresh()  # nothing new: nothing read again
