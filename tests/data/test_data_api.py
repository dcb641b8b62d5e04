"""trainops.data's public surface: every exported name resolves, and importing it is light."""

from __future__ import annotations

import subprocess
import sys

import trainops.data

EXPECTED = {
    "CorruptBudget", "CorruptRecordError", "DatasetIndexError", "Feature", "INDEX_NAME",
    "IRHeader", "LineReader", "PackError", "PackOptions", "PackResult", "RECORDIO_MAGIC",
    "RecordBlock", "RecordIOReader", "RecordIOWriter", "SHARD_FORMAT", "SHARD_MAGIC",
    "ShardIndex", "ShardInfo", "ShardReader", "TFRecordReader", "TFRecordWriter", "Verify",
    "decode_example", "encode_example", "encode_shard", "masked_crc32c", "pack", "pack_irheader",
    "read_idx", "recordio_frame", "recordio_header", "recordio_padding", "tfrecord_frame",
    "unpack_irheader", "write_idx", "write_shard",
}  # fmt: skip


def test_the_exports_are_the_expected_ones_and_resolve() -> None:
    assert set(trainops.data.__all__) >= EXPECTED
    missing = [name for name in trainops.data.__all__ if getattr(trainops.data, name, None) is None]
    assert missing == []


def test_importing_the_package_imports_none_of_its_modules_or_extras() -> None:
    code = (
        "import sys, trainops.data; "
        "print(sorted(m for m in sys.modules if m.startswith(('trainops.data._', 'torch', "
        "'numpy', 'google_crc32c', 'tqdm', 'obstore', 'pydantic'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_reading_records_does_not_import_the_packer() -> None:
    code = (
        "import sys; from trainops.data import RecordIOReader, ShardReader, LineReader; "
        "print(sorted(m for m in sys.modules if m.startswith(('trainops.data.packer', 'tqdm', "
        "'trainops.storage', 'torch'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
