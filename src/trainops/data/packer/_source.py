"""What ``trainops pack`` packs: the files under SRC, in order, with their labels.

SRC is a local directory, a ``file://`` prefix or an ``s3://`` prefix. Labels come from class
folders (the sorted names of SRC's top-level folders give labels 0, 1, 2, ... as im2rec and
torchvision's ImageFolder do; with no folders every label is 0) or from an im2rec ``.lst``
(``index<TAB>label...<TAB>path``), which also picks the files and their order. Symbolic links,
hidden names (``.x``) and anything that is not a regular file are never packed, so nothing is
read from outside SRC; a ``.lst`` path that leaves SRC is an error.
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, overload

from trainops.data._errors import PackError
from trainops.data.packer._local_files import LocalReader, walk_local
from trainops.data.packer._source_lst import read_lst

if TYPE_CHECKING:
    from trainops.storage import ObjectStore

__all__ = [
    "PackError",
    "Source",
    "SourceFile",
    "SourceFiles",
    "SourceReader",
    "list_source",
    "local_path",
    "object_store",
]


class SourceFile(NamedTuple):
    """One file to pack: its im2rec id, labels, path under SRC (``/``-separated) and size (-1
    where it was not listed: a local SRC lists a sample of sizes only).

    A tuple rather than a dataclass: a pack lists hundreds of thousands of them."""

    record_id: int
    labels: tuple[float, ...]
    key: str
    size: int


_new_file = partial(tuple.__new__, SourceFile)  # SourceFile._make, without its Python frame


class SourceFiles(Sequence[SourceFile]):
    """Files to pack, kept as columns (ids, labels, paths, sizes): a pack lists hundreds of
    thousands of files, and making a tuple for each took longer than listing them. Indexing
    and iterating give :class:`SourceFile` tuples (made as they are asked for); slicing
    slices the columns."""

    __slots__ = ("ids", "keys", "labels", "sizes")

    def __init__(
        self,
        ids: Sequence[int],
        labels: Sequence[tuple[float, ...]],
        keys: Sequence[str],
        sizes: Sequence[int],
    ) -> None:
        if not len(ids) == len(labels) == len(keys) == len(sizes):
            raise ValueError("SourceFiles: columns of different lengths")
        self.ids, self.labels, self.keys, self.sizes = ids, labels, keys, sizes

    @classmethod
    def of(cls, files: Sequence[SourceFile]) -> SourceFiles:
        """The columns of ``files`` (itself, if it is a ``SourceFiles``)."""
        if isinstance(files, SourceFiles):
            return files
        if not files:
            return cls((), (), (), ())
        ids, labels, keys, sizes = zip(*files, strict=True)
        return cls(ids, labels, keys, sizes)

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, index: int) -> SourceFile: ...

    @overload
    def __getitem__(self, index: slice) -> SourceFiles: ...

    def __getitem__(self, index: int | slice) -> SourceFile | SourceFiles:
        if isinstance(index, slice):
            return SourceFiles(
                self.ids[index], self.labels[index], self.keys[index], self.sizes[index]
            )
        return SourceFile(self.ids[index], self.labels[index], self.keys[index], self.sizes[index])

    def __iter__(self) -> Iterator[SourceFile]:
        return map(_new_file, zip(self.ids, self.labels, self.keys, self.sizes, strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable columns may back it

    def __repr__(self) -> str:
        return f"SourceFiles({len(self)} files)"


@dataclass(frozen=True, slots=True)
class Source:
    """The files of SRC in packing order; ``location`` is a local path or an ``s3://`` URI."""

    location: str
    files: SourceFiles
    classes: tuple[str, ...]

    @property
    def size_estimate(self) -> int:
        """The size assumed for a file whose size was not listed: the mean of those listed."""
        return _sizes(self.files.sizes)[0]

    @property
    def total_bytes(self) -> int:
        """The listed sizes, with the estimate for the others."""
        return _sizes(self.files.sizes)[1]

    def fingerprint(self) -> str:
        """A digest of every file's id, labels and path, and of the sizes listed (a changed
        SRC changes it)."""
        files = self.files
        digest = hashlib.sha256("\0".join(self.classes).encode() + b"\n")
        digest.update("\0".join(files.keys).encode() + b"\n")
        digest.update(array("Q", files.ids).tobytes())
        digest.update(array("q", files.sizes).tobytes())
        digest.update(array("Q", map(len, files.labels)).tobytes())
        digest.update(array("d", chain.from_iterable(files.labels)).tobytes())
        return digest.hexdigest()


def _sizes(sizes: Sequence[int]) -> tuple[int, int]:
    """The estimate for an unlisted size (the mean of the listed ones, rounded up) and the
    total with it; unlisted sizes are -1."""
    sizes = list(sizes)
    unknown = sizes.count(-1)
    listed, known = sum(sizes) + unknown, len(sizes) - unknown
    estimate = -(-listed // known) if known else 0
    return estimate, listed + unknown * estimate


def local_path(location: str) -> Path | None:
    """The local directory of a plain path or ``file://`` URI; None for other schemes."""
    if location.startswith("file://"):
        return Path(location.removeprefix("file://"))
    return None if "://" in location else Path(location)


def list_source(src: str, lst: Path | None) -> Source:
    """List SRC (and read its labels); an empty SRC is an error."""
    root = local_path(src)
    if root is not None:
        root = root.resolve()
        if not root.is_dir():
            raise PackError(f"SRC {src}: not a directory")
        sizes = walk_local(str(root))
        location = str(root)
    else:
        sizes = _list_store(src)
        location = src.rstrip("/")
    source = _with_labels(location, sizes, lst)
    if not source.files:
        raise PackError(f"SRC {src} holds no files to pack")
    return source


def _with_labels(location: str, sizes: dict[str, int], lst: Path | None) -> Source:
    if lst is not None:
        return Source(location, _listed(lst, sizes), ())
    keys = sorted(sizes)
    groups, loose = _folders(keys)
    classes = sorted(groups)
    if classes and loose:
        raise PackError(
            f"SRC {location} mixes files ({loose[0]}) with class folders ({classes[0]}/...): "
            "move them into folders or give the labels in a .lst"
        )
    labels: list[tuple[float, ...]] = [(0.0,)] * len(keys)
    for number, name in enumerate(classes):
        start, end = groups[name]
        labels[start:end] = [(float(number),)] * (end - start)
    files = SourceFiles(range(len(keys)), labels, keys, list(map(sizes.__getitem__, keys)))
    return Source(location, files, tuple(classes))


def _folders(keys: list[str]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """The top-level folders of sorted ``keys``, each with the ``[start, end)`` range of its
    files (contiguous: every path starting ``name/`` sorts before ``name0``, so one bisection
    finds a folder's end), and the files right under SRC."""
    groups: dict[str, tuple[int, int]] = {}
    loose: list[str] = []
    start = 0
    while start < len(keys):
        top, slash, _ = keys[start].partition("/")
        if not slash:
            loose.append(keys[start])
            start += 1
            continue
        end = bisect_left(keys, top + "0", start)  # "0" follows "/"
        groups[top] = (start, end)
        start = end
    return groups, loose


def _listed(lst: Path, sizes: dict[str, int]) -> SourceFiles:
    """The files an im2rec ``.lst`` names, in its order, with its ids and labels."""
    entries = read_lst(lst)
    for number, (_, _, key) in enumerate(entries, 1):
        if key not in sizes:
            raise PackError(f"{lst}: line {number}: {key} is not a file under SRC")
    ids = [entry[0] for entry in entries]
    keys = [entry[2] for entry in entries]
    return SourceFiles(ids, [entry[1] for entry in entries], keys, [sizes[k] for k in keys])


def _hidden(name: str) -> bool:
    return name.startswith(".")


def object_store(uri: str) -> ObjectStore:
    """The store of ``uri``'s scheme, with settings from this process's environment."""
    from trainops._settings import Settings
    from trainops.storage import store_for

    return store_for(uri, Settings.load())


def _list_store(src: str) -> dict[str, int]:
    store = object_store(src)
    prefix = src.rstrip("/") + "/"
    listed = store.list_objects(prefix)
    return {
        info.key: info.size
        for info in listed
        if not any(_hidden(part) for part in info.key.split("/")) and not info.key.endswith("/")
    }


class SourceReader:
    """Reads listed files of one SRC (one object-store client, or one set of open local
    folders, for all of them); close it when done (or use it as a context manager)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._store = object_store(location) if "://" in location else None
        self._local = LocalReader(location) if self._store is None else None

    def __enter__(self) -> SourceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._local is not None:
            self._local.close()

    def read(self, key: str, size: int) -> bytes:
        """The bytes of one listed file (``size`` -1: not listed); a link, a new size or an
        I/O error is a PackError."""
        if self._local is not None:
            return self._local.read(key, size)
        assert self._store is not None
        uri = f"{self.location}/{key}"
        data = self._store.get_bytes(uri)
        if len(data) != size:
            raise PackError(f"{self.location}/{key}: changed while packing ({size} bytes listed)")
        return data
