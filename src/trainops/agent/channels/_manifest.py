"""Manifests (``s3_data_type``): the objects a ManifestFile lists, the records of an augmented one.

ManifestFile (File and Pipe mode), as SageMaker defines it: one JSON array whose first element
is ``{"prefix": "s3://bucket/path/"}`` and whose other elements are keys relative to it::

    [{"prefix": "s3://bucket/images/"}, "cats/1.jpg", "dogs/7.jpg"]

Keys keep their relative paths (File mode writes ``cats/1.jpg`` under the channel directory);
a key that is absolute or has a ``..`` part is refused, and so is one naming no object.

AugmentedManifestFile (Pipe mode): JSON Lines, one object per line. For each line the channel's
``attribute_names`` become records, in that order. An attribute whose name ends in ``-ref``
holds the URI of an object whose bytes are streamed; any other attribute is streamed as text: a
JSON string as its characters (UTF-8, no quotes), any other value as its compact JSON
(``1``, ``[0.5,2]``, ``{"a":1}``), which is how SageMaker's example shows a label ``1``.

Every ``-ref`` object must exist when the channel starts: they are found by listing each parent
prefix once, not by one request per line. Any problem is one :class:`StorageError` naming the
manifest and the entry (its position in the array) or line (counted from 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainops._errors import StorageError
from trainops.storage import ObjectInfo, ObjectStore

__all__ = ["MAX_MANIFEST_BYTES", "Piece", "augmented_entries", "manifest_objects", "read_manifest"]

MAX_MANIFEST_BYTES = 1 << 30  # read whole into memory: bounded before a byte is fetched
Piece = ObjectInfo | bytes  # one record of an entry: an object's bytes, or bytes given inline
StoreFor = Callable[[str], ObjectStore]


def read_manifest(store: ObjectStore, uri: str) -> bytes:
    """The manifest's bytes, after checking it is one object not too large to hold."""
    found = [info for info in store.list_objects(uri) if info.uri == uri]
    if not found:
        raise StorageError(f"manifest {uri}: no such object (a manifest is one object)")
    size = found[0].size
    if size > MAX_MANIFEST_BYTES:
        raise StorageError(
            f"manifest {uri}: {size} bytes; a manifest may hold {MAX_MANIFEST_BYTES}"
        )
    data = store.get_range(uri, 0, size)
    if len(data) != size:
        raise StorageError(f"manifest {uri}: changed while it was read")
    return data


def manifest_objects(uri: str, store_for: StoreFor) -> list[ObjectInfo]:
    """The objects a ManifestFile lists, in its order, with their sizes."""
    prefix, keys = _parse_manifest(uri, read_manifest(store_for(uri), uri))
    listed = {info.key: info for info in store_for(prefix).list_objects(prefix)}
    out = []
    for index, key in enumerate(keys, start=1):
        info = listed.get(key)
        if info is None:
            raise StorageError(f"manifest {uri}: entry {index} ({key!r}): no object {prefix}{key}")
        out.append(ObjectInfo(uri=prefix + key, key=key, size=info.size))
    return out


def _parse_manifest(uri: str, raw: bytes) -> tuple[str, list[str]]:
    data = _json(uri, raw, "the file")
    head = data[0] if isinstance(data, list) and data else None
    if not isinstance(head, dict) or set(head) != {"prefix"} or not isinstance(head["prefix"], str):
        raise StorageError(
            f'manifest {uri}: not a JSON array starting with {{"prefix": "s3://bucket/path/"}}'
        )
    prefix = head["prefix"]
    if "://" not in prefix or not prefix.endswith("/"):
        raise StorageError(f"manifest {uri}: entry 0: prefix {prefix!r} must be a URI ending in /")
    keys = [_key(uri, index, entry) for index, entry in enumerate(data[1:], start=1)]
    if not keys:
        raise StorageError(f"manifest {uri}: lists no objects")
    return prefix, keys


def _key(uri: str, index: int, entry: Any) -> str:
    if not isinstance(entry, str) or not entry:
        raise StorageError(f"manifest {uri}: entry {index}: {entry!r} is not a relative key")
    if entry.startswith("/") or ".." in entry.split("/") or "\0" in entry:
        raise StorageError(
            f"manifest {uri}: entry {index} ({entry!r}): a key may not be absolute nor "
            "contain '..' (it would leave the prefix)"
        )
    return entry


def augmented_entries(
    uri: str, attribute_names: Sequence[str], store_for: StoreFor
) -> list[tuple[Piece, ...]]:
    """One entry per line of an augmented manifest: its attributes' records, in order."""
    lines = list(_lines(uri, read_manifest(store_for(uri), uri)))
    if not lines:
        raise StorageError(f"manifest {uri}: has no lines")
    refs = sorted({value for _n, row in lines for value in _ref_values(row, attribute_names)})
    known = _ref_sizes(uri, refs, store_for)
    return [_entry(uri, number, row, attribute_names, known) for number, row in lines]


def _lines(uri: str, raw: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        row = _json(uri, line, f"line {number}")
        if not isinstance(row, dict):
            raise StorageError(f"manifest {uri}: line {number}: not a JSON object")
        yield number, row


def _ref_values(row: dict[str, Any], names: Sequence[str]) -> Iterator[str]:
    for name in names:
        value = row.get(name)
        if name.endswith("-ref") and isinstance(value, str):
            yield value


def _entry(
    uri: str, number: int, row: dict[str, Any], names: Sequence[str], known: dict[str, int]
) -> tuple[Piece, ...]:
    pieces: list[Piece] = []
    for name in names:
        if name not in row:
            raise StorageError(f"manifest {uri}: line {number}: no attribute {name!r}")
        value = row[name]
        if not name.endswith("-ref"):
            pieces.append(value.encode() if isinstance(value, str) else _compact(value))
        elif not isinstance(value, str) or "://" not in value:
            raise StorageError(f"manifest {uri}: line {number}: {name} {value!r} is not a URI")
        elif value not in known:
            raise StorageError(f"manifest {uri}: line {number}: {name} {value!r}: no such object")
        else:
            pieces.append(ObjectInfo(uri=value, key=value.rsplit("/", 1)[-1], size=known[value]))
    return tuple(pieces)


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _ref_sizes(uri: str, refs: list[str], store_for: StoreFor) -> dict[str, int]:
    """The size of every ``-ref`` object that exists (missing ones are left out)."""
    parents: dict[str, set[str]] = {}
    for ref in refs:
        if "://" not in ref or ".." in ref.split("://", 1)[1].split("/"):
            continue  # not a URI, or one that climbs: reported as missing, with its line
        parent, _sep, _name = ref.rpartition("/")
        parents.setdefault(parent + "/", set()).add(ref)
    known: dict[str, int] = {}
    wanted = set(refs)

    def look(parent: str) -> dict[str, int]:
        try:
            listed = store_for(parent).list_objects(parent)
        except StorageError as exc:
            raise StorageError(f"manifest {uri}: {exc}") from None
        return {parent + info.key: info.size for info in listed if parent + info.key in wanted}

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="manifest-list") as pool:
        for found in pool.map(look, sorted(parents)):
            known.update(found)
    return known


def _json(uri: str, raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StorageError(f"manifest {uri}: {where}: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        at = (
            f"line {exc.lineno}, column {exc.colno}"
            if where == "the file"
            else f"column {exc.colno}"
        )
        raise StorageError(f"manifest {uri}: {where}: not valid JSON ({exc.msg} at {at})") from None
