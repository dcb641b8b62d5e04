"""``index.json``: the table of contents of a sharded dataset.

::

    {
      "format": "trainops-shards",        # or "recordio" / "tfrecord" (what trainops pack wrote)
      "version": 1,
      "total_records": 200000,
      "shards": [
        {"name": "shard-00000.tops", "records": 15872, "bytes": 67108864,
         "sha256": "9f86d0..."},
        ...
      ],
      "config": {...}                      # free-form: how the producer made it
    }

A shard's ``name`` is a plain file name beside ``index.json`` (no ``/``, no ``..``): an index
fetched from a bucket can never point a reader outside its dataset. :func:`parse_index` checks
every field and names the first bad one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops._errors import TrainopsError

__all__ = ["INDEX_NAME", "SHARD_FORMAT", "DatasetIndexError", "ShardIndex", "ShardInfo"]

INDEX_NAME = "index.json"
SHARD_FORMAT = "trainops-shards"
FORMATS = (SHARD_FORMAT, "recordio", "tfrecord")
INDEX_VERSION = 1
MAX_INDEX_BYTES = 64 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


class DatasetIndexError(TrainopsError):
    """An ``index.json`` is malformed; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard: its file name, record count, size in bytes and sha256 (hex)."""

    name: str
    records: int
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ShardIndex:
    """A dataset's shards in order, their format and the producer's configuration."""

    shards: tuple[ShardInfo, ...]
    format: str = SHARD_FORMAT
    version: int = INDEX_VERSION
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def total_records(self) -> int:
        return sum(shard.records for shard in self.shards)

    def to_json(self) -> str:
        shards = [
            {"name": s.name, "records": s.records, "bytes": s.bytes, "sha256": s.sha256}
            for s in self.shards
        ]
        body = {
            "format": self.format,
            "version": self.version,
            "total_records": self.total_records,
            "shards": shards,
            "config": dict(self.config),
        }
        return json.dumps(body, indent=1, sort_keys=True) + "\n"

    @classmethod
    def parse(cls, text: str | bytes, *, source: str = INDEX_NAME) -> ShardIndex:
        """Read an index, refusing anything malformed with the file and field named."""
        if len(text) > MAX_INDEX_BYTES:
            raise DatasetIndexError(f"{source}: {len(text)} bytes is too large for an index")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise DatasetIndexError(f"{source}: not JSON: {error}") from None
        return _from_body(body, source)


def _need(ok: bool, source: str, where: str, what: str) -> None:
    if not ok:
        raise DatasetIndexError(f"{source}: {where}: {what}")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _from_body(body: object, source: str) -> ShardIndex:
    _need(isinstance(body, dict), source, "<index>", "expected a JSON object")
    assert isinstance(body, dict)
    _need(body.get("format") in FORMATS, source, "format", f"expected one of {FORMATS}")
    version = body.get("version")
    _need(version == INDEX_VERSION, source, "version", f"{version!r} is not {INDEX_VERSION}")
    raw = body.get("shards")
    _need(isinstance(raw, list), source, "shards", "expected a list")
    assert isinstance(raw, list)
    shards = tuple(_shard(item, source, f"shards[{k}]") for k, item in enumerate(raw))
    names = [shard.name for shard in shards]
    _need(len(set(names)) == len(names), source, "shards", "a shard name appears twice")
    config = body.get("config", {})
    _need(isinstance(config, dict), source, "config", "expected a JSON object")
    index = ShardIndex(shards, body["format"], INDEX_VERSION, config)
    total = body.get("total_records")
    _need(total == index.total_records, source, "total_records", "is not the shards' sum")
    return index


def _shard(item: object, source: str, where: str) -> ShardInfo:
    _need(isinstance(item, dict), source, where, "expected a JSON object")
    assert isinstance(item, dict)
    name, records, size, digest = (item.get(k) for k in ("name", "records", "bytes", "sha256"))
    plain = isinstance(name, str) and _NAME.fullmatch(name) is not None and ".." not in name
    _need(plain, source, f"{where}.name", f"{name!r} is not a plain file name")
    _need(_count(records), source, f"{where}.records", "expected a count (0 or more)")
    _need(_count(size), source, f"{where}.bytes", "expected a size in bytes")
    sha = isinstance(digest, str) and _SHA256.fullmatch(digest) is not None
    _need(sha, source, f"{where}.sha256", "expected 64 lowercase hex digits")
    assert isinstance(name, str) and isinstance(records, int)
    assert isinstance(size, int) and isinstance(digest, str)
    return ShardInfo(name, records, size, digest)
