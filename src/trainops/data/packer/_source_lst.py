"""im2rec's ``.lst``: which files to pack, in which order, with which id and labels.

One line per file, fields separated by tabs: ``index<TAB>label[<TAB>label...]<TAB>path``,
``path`` relative to SRC (im2rec writes labels as ``%f``). Every line is checked: a malformed
one is an error naming the ``.lst`` and the line; so is an id that appears twice (an ``.idx``
needs unique ids), a path with ``..`` or a leading ``/``, or a line longer than 64 KiB.
"""

from __future__ import annotations

import math
from pathlib import Path

from trainops.data._errors import PackError

__all__ = ["LstEntry", "format_lst_line", "read_lst"]

LstEntry = tuple[int, tuple[float, ...], str]
_MAX_LINE = 64 << 10
_MAX_ID = (1 << 64) - 1


class LstError(PackError):
    """A ``.lst`` line is malformed."""


def format_lst_line(index: int, labels: tuple[float, ...], key: str) -> str:
    """One ``.lst`` line as im2rec writes it."""
    return "\t".join([str(index), *(f"{label:f}" for label in labels), key]) + "\n"


def read_lst(path: Path) -> list[LstEntry]:
    """Every entry of the ``.lst`` at ``path``, in file order."""
    entries: list[LstEntry] = []
    seen: set[int] = set()
    try:
        with open(path, "rb") as handle:
            while raw := handle.readline(_MAX_LINE + 1):
                number = len(entries) + 1
                entry = _parse(path, number, raw)
                if entry[0] in seen:
                    raise LstError(f"{path}: line {number}: id {entry[0]} appears twice")
                seen.add(entry[0])
                entries.append(entry)
    except OSError as error:
        raise LstError(f"cannot read the label list {path}: {error.strerror}") from None
    return entries


def _parse(path: Path, number: int, raw: bytes) -> LstEntry:
    where = f"{path}: line {number}"
    if len(raw) > _MAX_LINE:
        raise LstError(f"{where}: longer than {_MAX_LINE} bytes")
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise LstError(f"{where}: not UTF-8") from None
    fields = text.split("\t")
    if len(fields) < 3:
        raise LstError(f"{where}: expected index<TAB>label...<TAB>path, got {text[:80]!r}")
    return _index(where, fields[0]), _labels(where, fields[1:-1]), _key(where, fields[-1])


def _index(where: str, field: str) -> int:
    if not field.strip().isdigit() or int(field) > _MAX_ID:
        raise LstError(f"{where}: the index {field[:40]!r} is not a whole number 0 to 2**64-1")
    return int(field)


def _labels(where: str, fields: list[str]) -> tuple[float, ...]:
    try:
        labels = tuple(float(field) for field in fields)
    except ValueError:
        raise LstError(f"{where}: labels must be numbers, got {fields[:4]!r}") from None
    if not all(math.isfinite(label) for label in labels):
        raise LstError(f"{where}: labels must be finite numbers")
    return labels


def _key(where: str, field: str) -> str:
    key = field.strip()
    parts = key.split("/")
    if not key or key.startswith("/") or ".." in parts or "\0" in key:
        raise LstError(f"{where}: {key[:80]!r} is not a path inside SRC")
    return key
