"""Resuming ``trainops pack``: what DEST already holds, and whether it may be continued.

An ``index.json`` made with the same configuration means the pack is done; one made
differently is refused. Without it, ``.pack/plan.json`` holds the configuration of an
unfinished pack: the same one is continued (every shard whose marker, size and files are there
is kept), a different one refused. A DEST holding anything else is refused too: the packer
never writes into a directory it did not start.
"""

from __future__ import annotations

import json
from typing import Any

from trainops.data.packer._dest import WORK_DIR, PackDest
from trainops.data.packer._formats import FORMATS
from trainops.data.packer._source import PackError
from trainops.data.packer._worker import marker_name
from trainops.data.shards._index import INDEX_NAME, ShardIndex, ShardInfo

__all__ = ["PLAN_NAME", "existing_index", "resume"]

PLAN_NAME = f"{WORK_DIR}/plan.json"


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in new.keys() | old.keys() if old.get(k) != new.get(k))
    if "source" in keys:
        return "the files under SRC (or their labels) are not the same"
    return "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in keys[:3])


def existing_index(target: PackDest, config: dict[str, Any]) -> ShardIndex | None:
    """The index of a finished pack in DEST made with ``config``; None if there is none."""
    raw = target.read(INDEX_NAME)
    if raw is None:
        return None
    index = ShardIndex.parse(raw, source=f"{target.location}/{INDEX_NAME}")
    if dict(index.config) != config:
        raise PackError(
            f"DEST {target.location} already holds a pack made differently "
            f"({_differences(dict(index.config), config)}): pick another DEST"
        )
    return index


def resume(
    target: PackDest, config: dict[str, Any], plan: list[tuple[int, int]]
) -> dict[int, ShardInfo]:
    """Start a pack in an empty DEST, or continue one: the shards already finished."""
    sizes = target.sizes()
    raw = target.read(PLAN_NAME)
    if raw is None:
        visible = sorted(name for name in sizes if not name.startswith(f"{WORK_DIR}/"))
        if visible:
            raise PackError(
                f"DEST {target.location} is not empty (it holds {visible[0]}): pick an empty or new DEST"
            )
        target.write(PLAN_NAME, json.dumps(config, sort_keys=True).encode())
        return {}
    old = _read_plan(target, raw)
    if old != config:
        raise PackError(
            f"DEST {target.location} holds an unfinished pack made differently "
            f"({_differences(old, config)}): rerun that pack, or remove {WORK_DIR}/ from DEST"
        )
    target.clean_staging()
    return _finished(target, config["format"], plan, sizes)


def _read_plan(target: PackDest, raw: bytes) -> dict[str, Any]:
    try:
        old = json.loads(raw)
    except (ValueError, RecursionError):
        old = None
    if not isinstance(old, dict):
        raise PackError(
            f"{target.location}/{PLAN_NAME} is unreadable: remove {WORK_DIR}/ from DEST"
        )
    return old


def _finished(
    target: PackDest, fmt: str, plan: list[tuple[int, int]], sizes: dict[str, int]
) -> dict[int, ShardInfo]:
    done = {}
    for number, (start, end) in enumerate(plan):
        if marker_name(number) in sizes:
            info = _marker(target.read(marker_name(number)))
            if info is not None and _whole(info, FORMATS[fmt].files(number), end - start, sizes):
                done[number] = info
    return done


def _whole(info: ShardInfo, names: tuple[str, ...], records: int, sizes: dict[str, int]) -> bool:
    """Whether a marker describes the planned shard and all of its files are in DEST."""
    present = all(name in sizes for name in names)
    planned = info.name == names[0] and info.records == records
    return present and planned and sizes[info.name] == info.bytes


def _marker(raw: bytes | None) -> ShardInfo | None:
    try:
        body = json.loads(raw or b"")
        return ShardInfo(
            str(body["name"]), int(body["records"]), int(body["bytes"]), str(body["sha256"])
        )
    except (ValueError, TypeError, KeyError):
        return None  # a marker that does not read back: the shard is packed again
