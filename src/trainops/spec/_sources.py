"""Checking a job's local channel sources at submission, before anything is created.

A ``file://`` (or plain-path, already resolved to ``file://``) channel is read where the job's
hosts run, which for every backend is a path the submitting machine sees too (the client
resolved it against its own folders). A wrong one would otherwise only be found once the job is
created, placed and billed, when its hosts download the channel; here it is refused with the
field, the channel and the path. The check is cheap whatever the size of the data: a prefix
only needs one file under it (the walk stops at the first), a manifest only needs to be a file.

``s3://`` sources are not looked at here (that needs the network and the job's credentials):
their hosts find a missing prefix when they download the channel (docs/data.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainops.spec._job import JobSpec

__all__ = ["raw_source_problems", "source_problem", "spec_source_problems"]

Problems = list[tuple[str, str]]
_MANIFESTS = frozenset({"manifestfile", "augmentedmanifestfile"})
_FILE = "file://"


def source_problem(channel: str, uri: str, data_type: str | None = None) -> str | None:
    """Why the channel ``channel`` cannot read the ``file://`` source ``uri``, or None (also for
    any other scheme). ``data_type`` is the channel's ``s3_data_type``: a manifest must be a file."""
    if not uri.startswith(_FILE) or "\x00" in uri:
        return None
    # As the file store reads it: the rest of the URI is the path, as written.
    path = Path(uri[len(_FILE) :])
    try:
        if _is_manifest(data_type):
            return None if path.is_file() else _why_not_a_file(channel, path)
        if path.is_file():
            return None
        if not path.is_dir():
            what = "is neither a file nor a folder" if path.exists() else "does not exist"
            return f"channel {channel!r}: {_shown(path, uri)} {what}"
        if not _holds_a_file(path):
            return f"channel {channel!r}: {_shown(path, uri)} holds no files to download"
    except OSError as exc:  # a folder on the way that cannot be read, a name too long
        return f"channel {channel!r}: cannot read {_shown(path, uri)}: {exc.strerror or exc}"
    return None


def spec_source_problems(spec: JobSpec) -> Problems:
    """The problems of every local channel source of a validated spec (paths resolved)."""
    problems: Problems = []
    for name, channel in spec.inputs.items():
        if channel.uri is None:
            continue  # a file_system channel: its directory is checked on each host
        problem = source_problem(name, channel.uri, channel.s3_data_type.value)
        if problem is not None:
            problems.append((f"inputs.{name}.uri", problem))
    return problems


def raw_source_problems(data: Mapping[str, Any]) -> Problems:
    """The same for a spec read as plain data, in any shape the spec allows for ``inputs``: one
    URI (the channel ``training``), a URI per channel, or a mapping per channel."""
    problems: Problems = []
    for field, name, uri, data_type in _raw_channels(data.get("inputs")):
        problem = source_problem(name, uri, data_type)
        if problem is not None:
            problems.append((field, problem))
    return problems


def _raw_channels(inputs: Any) -> Iterator[tuple[str, str, str, str | None]]:
    if isinstance(inputs, str):
        yield "inputs", "training", inputs, None
        return
    if not isinstance(inputs, dict):
        return
    for name, channel in inputs.items():
        if isinstance(channel, str):
            yield f"inputs.{name}", str(name), channel, None
        elif isinstance(channel, dict) and isinstance(channel.get("uri"), str):
            kind = channel.get("s3_data_type")
            yield f"inputs.{name}.uri", str(name), channel["uri"], _text_or_none(kind)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _is_manifest(data_type: str | None) -> bool:
    return data_type is not None and data_type.replace("_", "").replace("-", "").lower() in (
        _MANIFESTS
    )


def _why_not_a_file(channel: str, path: Path) -> str:
    if path.is_dir():
        return f"channel {channel!r}: {path} is a folder; a manifest channel's uri names a file"
    return f"channel {channel!r}: manifest {path} does not exist"


def _holds_a_file(root: Path) -> bool:
    """Whether a regular file (what a listing calls an object) lies anywhere under ``root``."""
    for dirpath, _dirs, files in os.walk(root, onerror=_raise):
        for name in files:
            if name.startswith(".") and name.endswith(".part"):
                continue  # an upload in flight, as the file store lists it
            if not (Path(dirpath) / name).is_symlink():
                return True
    return False


def _raise(error: OSError) -> None:
    raise error


def _shown(path: Path, uri: str) -> str:
    """The path as the user wrote it (a prefix's trailing slash kept)."""
    return f"{path}/" if uri.endswith("/") and str(path) != "/" else str(path)
