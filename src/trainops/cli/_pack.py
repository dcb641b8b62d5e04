"""``trainops pack SRC DEST``: the packer of :mod:`trainops.data` behind the command line.

The progress bar goes to stderr when it is a terminal; one summary line goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["pack"]


def pack(args: argparse.Namespace) -> int:
    from trainops.data.packer._pack import PackOptions, default_workers
    from trainops.data.packer._pack import pack as run_pack

    options = PackOptions(
        format=args.format,
        shard_size=args.shard_size,
        workers=args.workers or default_workers(),
        labels=Path(args.labels) if args.labels else None,
        progress=sys.stderr.isatty(),
    )
    result = run_pack(args.src, args.dest, options)
    index = result.index
    size = sum(shard.bytes for shard in index.shards)
    print(
        f"packed {index.total_records} files into {len(index.shards)} shard(s) "
        f"({args.format}, {_megabytes(size)}) in {result.location}: "
        f"{result.written} written, {result.kept} kept from an earlier run"
    )
    return 0


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
