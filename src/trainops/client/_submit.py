"""Submitting a job: get its name, pack and upload its source, then create it on the server.

The source travels as ``<output>/<job>/source/sourcedir.tar.gz``, as with the SageMaker SDK.
Without a ``source_dir`` only the entry-point file is packed (again as the SageMaker SDK does),
under its path relative to the base directory so that ``entry_point`` still names it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from trainops._errors import SpecError
from trainops._settings import Settings
from trainops.archive import pack
from trainops.client._http import Client, JobNameTakenError
from trainops.client._progress import TransferBar
from trainops.spec import JobSpec, base_job_name, resolve_paths
from trainops.storage import join_uri, store_for

__all__ = ["code_uri_for", "pack_source", "submit_job"]

SOURCE_ARCHIVE = "source/sourcedir.tar.gz"
# A generated name the server handed out is only taken if someone submitted that exact name
# explicitly in between; a few fresh names are plenty.
NAME_TRIES = 3


def submit_job(
    client: Client,
    spec: JobSpec,
    settings: Settings,
    *,
    base_dir: Path | str | None = None,
    progress: bool = True,
) -> str:
    """Upload ``spec``'s code and create the job; returns the job name.

    Relative paths in ``spec`` are resolved against ``base_dir`` (default: the current directory).
    Without a ``job_name`` the server names the job (``<base>-<timestamp>``, unique however many
    submissions run at once) before the code is uploaded under that name; an explicit
    ``job_name`` that exists is an error.
    """
    base = Path(base_dir).resolve() if base_dir is not None else Path.cwd()
    spec = resolve_paths(spec, base)
    output = spec.output_path or str(client.info()["default_output_uri"])
    for attempt in range(1, NAME_TRIES + 1):
        name = spec.job_name or client.new_job_name(base_job_name(spec))
        code_uri = _stage_code(spec, base, join_uri(output, name), settings, progress)
        try:
            client.submit(name, spec, code_uri)
        except JobNameTakenError:
            if spec.job_name or attempt == NAME_TRIES:
                raise
            continue
        return name
    raise AssertionError("unreachable")


def code_uri_for(output_prefix: str) -> str:
    """Where the packed source of the job whose output prefix is ``output_prefix`` goes."""
    return join_uri(output_prefix, SOURCE_ARCHIVE)


def pack_source(spec: JobSpec, base_dir: Path, dest: Path) -> Path:
    """Pack a local source: all of ``source_dir``, or only the entry point (relative to ``base_dir``)."""
    if spec.source_dir is None:
        return pack(base_dir, dest, files=[Path(spec.entry_point)])
    return pack(base_dir / spec.source_dir, dest)


def _stage_code(
    spec: JobSpec, base_dir: Path, prefix: str, settings: Settings, progress: bool
) -> str:
    if spec.source_dir is not None and "://" in spec.source_dir:
        return _existing_archive(spec.source_dir, settings)
    target = code_uri_for(prefix)
    with tempfile.TemporaryDirectory(prefix="trainops-source-") as tmp:
        archive = pack_source(spec, base_dir, Path(tmp) / "sourcedir.tar.gz")
        size = archive.stat().st_size
        with TransferBar(size, "uploading source", enabled=progress) as bar:
            store_for(target, settings).upload(archive, target, on_bytes=bar)
    return target


def _existing_archive(uri: str, settings: Settings) -> str:
    """A ``source_dir`` given as a URI names a ready ``.tar.gz``, used as it is."""
    if not uri.endswith((".tar.gz", ".tgz")):
        raise SpecError([("source_dir", f"{uri} is a URI, so it must name a .tar.gz archive")])
    if not store_for(uri, settings).exists(uri):
        raise SpecError([("source_dir", f"no archive at {uri}")])
    return uri
