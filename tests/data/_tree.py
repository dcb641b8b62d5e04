"""Directories of small files for the packer's tests: class folders of random bytes."""

from __future__ import annotations

import random
from pathlib import Path


def make_tree(
    root: Path, classes: dict[str, int], *, seed: int = 0, max_size: int = 3000
) -> dict[str, bytes]:
    """Write ``count`` files into each class folder; returns key -> bytes."""
    rng = random.Random(seed)
    files = {}
    for name, count in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            data = rng.randbytes(rng.randrange(1, max_size))
            key = f"{name}/{i:04d}.bin"
            (root / key).write_bytes(data)
            files[key] = data
    return files


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), hidden ones too."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
