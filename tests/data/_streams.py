"""Packed datasets and FIFO writers for the streaming-dataset and Pipe-mode tests.

Record ``g`` of a dataset made here is ``b"rec-<g, 7 digits>"`` followed by ``g % 13`` filler
bytes, so any record names its own global id and records differ in length.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainops.data import ShardIndex, ShardInfo, write_shard


def record(g: int) -> bytes:
    return b"rec-%07d" % g + b"x" * (g % 13)


def ident(payload: bytes | memoryview) -> int:
    """The global id a record made by :func:`record` carries."""
    return int(bytes(payload[4:11]))


def make_dataset(root: Path, counts: Sequence[int], first: int = 0) -> list[bytes]:
    """Shards of ``counts`` records each plus ``index.json`` in ``root``; all records, in order
    (global ids from ``first``: a multiple of 13 gives every record the same length)."""
    root.mkdir(parents=True, exist_ok=True)
    infos: list[ShardInfo] = []
    every: list[bytes] = []
    for number, count in enumerate(counts):
        records = [record(first + len(every) + i) for i in range(count)]
        infos.append(write_shard(root / f"part-{number:05d}.tops", records))
        every += records
    (root / "index.json").write_text(ShardIndex(tuple(infos)).to_json())
    return every


def ids(items: Iterable[Any]) -> list[int]:
    """Global ids of what a dataset yielded (batches flattened)."""
    out: list[int] = []
    for item in items:
        if isinstance(item, bytes | memoryview):
            out.append(ident(item))
        else:
            out += [ident(r) for r in item]
    return out


def write_input_config(config_dir: Path, channels: dict[str, dict[str, Any]]) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "inputdataconfig.json").write_text(json.dumps(channels))


def pipe_env(root: Path, name: str, mode: str = "Pipe", **extra: str) -> dict[str, str]:
    """A job tree under ``root`` with channel ``name`` in ``mode``: the SM_* variables."""
    write_input_config(root / "input" / "config", {name: {"TrainingInputMode": mode, **extra}})
    (root / "input" / "data").mkdir(parents=True, exist_ok=True)
    return {
        "SM_INPUT_DIR": str(root / "input"),
        "SM_INPUT_CONFIG_DIR": str(root / "input" / "config"),
        f"SM_CHANNEL_{name.upper()}": str(root / "input" / "data" / name),
    }


class FifoWriter(threading.Thread):
    """Serves ``epochs`` (one byte string each) through ``<folder>/<name>_<k>`` in turn, each
    FIFO made once the previous one was read to its end, as the agent does."""

    def __init__(self, folder: Path, name: str, epochs: Sequence[bytes], chunk: int = 1 << 16):
        super().__init__(daemon=True)
        self.folder, self.name, self.epochs, self.chunk = folder, name, epochs, chunk
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for k, data in enumerate(self.epochs):
                path = self.folder / f"{self.name}_{k}"
                os.mkfifo(path)
                with open(path, "wb", buffering=0) as fifo:
                    for at in range(0, len(data), self.chunk):
                        try:
                            fifo.write(data[at : at + self.chunk])
                        except BrokenPipeError:  # the reader left early: the epoch ends
                            break
                path.unlink()
        except BaseException as error:  # surfaced by the test through .error
            self.error = error
