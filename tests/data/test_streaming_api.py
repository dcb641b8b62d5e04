"""The streaming datasets' public names, and their use without torch (a plain Python loop)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trainops.data
from tests.data._streams import make_dataset

NAMES = {
    "PipeChannelError", "PipeModeDataset", "PlacementError", "RecordBatch", "StreamingDataset",
    "StreamingLoader",
}  # fmt: skip


def test_the_streaming_names_are_exported_and_resolve() -> None:
    assert set(trainops.data.__all__) >= NAMES
    assert all(getattr(trainops.data, name) is not None for name in NAMES)


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # as if torch were not installed: importing it fails
from trainops.data import PipeModeDataset, StreamingDataset
dataset = StreamingDataset(sys.argv[1], batch_size=4, seed=1)
seen = sorted(bytes(r) for batch in dataset for r in batch)
print(StreamingDataset.__mro__[1].__name__, PipeModeDataset.__mro__[1].__name__, len(seen))
"""


def test_without_torch_the_datasets_are_plain_iterables(tmp_path: Path) -> None:
    every = make_dataset(tmp_path / "ds", [5, 6])
    assert _run(WITHOUT_TORCH.replace("sys.argv[1]", repr(str(tmp_path / "ds")))) == (
        f"object object {len(every)}"
    )


def test_with_torch_they_are_iterable_datasets() -> None:
    from torch.utils.data import IterableDataset

    assert issubclass(trainops.data.StreamingDataset, IterableDataset)
    assert issubclass(trainops.data.PipeModeDataset, IterableDataset)


def test_a_local_folder_needs_no_object_store_client(tmp_path: Path) -> None:
    make_dataset(tmp_path / "ds", [3])
    code = (
        "import sys; from trainops.data import StreamingDataset; "
        f"list(StreamingDataset({str(tmp_path / 'ds')!r})); "
        "print(sorted(m for m in sys.modules if m.startswith(('obstore', 'trainops.storage'))))"
    )
    assert _run(code) == "[]"
