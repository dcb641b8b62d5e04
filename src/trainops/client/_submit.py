"""Submitting a job: get its name, pack and upload its source, then create it on the server.

The source travels as ``<output>/<job>/source/sourcedir.tar.gz``, as with the SageMaker SDK.
Without a ``source_dir`` only the entry-point file is packed (again as the SageMaker SDK does),
under its path relative to the base directory so that ``entry_point`` still names it.

:func:`submit_job` takes a validated :class:`~trainops.spec.JobSpec` (the SDK's way);
:func:`submit_spec` takes a spec file read as plain data (the CLI's way, which spares every
command the spec models' import): the server validates it, and its problems come back with the
file's line numbers, as local validation gives them. A refused spec's uploaded source is removed.

Local (``file://``) channel sources are checked first, before a name is asked for or anything is
uploaded: a missing or empty one is a :class:`SpecError` naming the field and the path. What the
server says the job will not get where it runs (its ``Warnings``: private namespaces, /opt/ml)
goes to ``on_warning``, one line each (by default to stderr, as ``warning: …``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops._errors import JobNotFoundError, SpecError, TrainopsError
from trainops._settings import Settings
from trainops.archive import pack
from trainops.client._http import Client, JobNameTakenError
from trainops.client._progress import TransferBar
from trainops.spec import RawSpec, base_job_name
from trainops.storage import join_uri, store_for

if TYPE_CHECKING:
    from trainops.spec import JobSpec

__all__ = ["code_uri_for", "pack_source", "submit_job", "submit_spec"]

SOURCE_ARCHIVE = "source/sourcedir.tar.gz"
# A generated name the server handed out is only taken if someone submitted that exact name
# explicitly in between; a few fresh names are plenty.
NAME_TRIES = 3
WARNING_CHARS = 1000  # of one server warning shown


@dataclass(frozen=True, slots=True)
class _Job:
    """What submitting needs of a spec, whichever form it came in."""

    fields: Mapping[str, Any]
    job_name: str | None
    base_job_name: str
    output_path: str | None
    source_dir: str | None
    entry_point: str
    base_dir: Path
    # Raises what is wrong with the spec, if anything (a server's refusal comes too late when an
    # explicit job_name is taken: nothing may be uploaded over that job's source).
    validate: Callable[[], object] = lambda: None


def submit_job(
    client: Client,
    spec: JobSpec,
    settings: Settings,
    *,
    base_dir: Path | str | None = None,
    progress: bool = True,
    on_warning: Callable[[str], None] | None = None,
) -> str:
    """Upload ``spec``'s code and create the job; returns the job name.

    Relative paths in ``spec`` are resolved against ``base_dir`` (default: the current directory).
    Without a ``job_name`` the server names the job (``<base>-<timestamp>``, unique however many
    submissions run at once) before the code is uploaded under that name; an explicit
    ``job_name`` that exists is an error. The server's warnings go to ``on_warning`` (default:
    stderr).
    """
    # The caller has the models imported already.
    from trainops.spec import check_channel_sources, resolve_paths

    base = Path(base_dir).resolve() if base_dir is not None else Path.cwd()
    spec = resolve_paths(spec, base)
    check_channel_sources(spec)
    job = _Job(
        spec.model_dump(mode="json"),
        spec.job_name,
        base_job_name(spec),
        spec.output_path,
        spec.source_dir,
        spec.entry_point,
        base,
    )
    return _create(client, job, settings, progress, lambda exc: exc, on_warning)


def submit_spec(
    client: Client,
    spec: RawSpec,
    settings: Settings,
    *,
    progress: bool = True,
    on_warning: Callable[[str], None] | None = None,
) -> str:
    """Like :func:`submit_job` for a spec read with :func:`~trainops.spec.load_raw_spec`.

    The server validates the fields; a refusal is a :class:`SpecError` naming each field's line
    in the file. A spec whose names, paths or code are wrong already here is validated locally
    instead (:meth:`RawSpec.validate`), which says exactly what is wrong.
    """
    spec.check_sources()
    if not spec.sendable:
        return submit_job(
            client,
            spec.validate(),
            settings,
            base_dir=spec.base_dir,
            progress=progress,
            on_warning=on_warning,
        )
    job = _Job(
        spec.data,
        spec.job_name,
        spec.base_job_name,
        spec.output_path,
        spec.source_dir,
        spec.entry_point,
        spec.base_dir,
        spec.validate,
    )
    return _create(
        client, job, settings, progress, lambda exc: spec.error(exc.problems), on_warning
    )


def code_uri_for(output_prefix: str) -> str:
    """Where the packed source of the job whose output prefix is ``output_prefix`` goes."""
    return join_uri(output_prefix, SOURCE_ARCHIVE)


def pack_source(
    spec: JobSpec, base_dir: Path, dest: Path, settings: Settings | None = None
) -> Path:
    """Pack a local source: all of ``source_dir``, or only the entry point (relative to ``base_dir``).

    The trainops home (``settings.home``) is left out where it lies inside the source: it holds
    every earlier job's objects, source archives included, so each submission would pack all the
    ones before it.
    """
    return _pack(spec.source_dir, spec.entry_point, base_dir, dest, settings)


def _pack(
    source_dir: str | None,
    entry_point: str,
    base_dir: Path,
    dest: Path,
    settings: Settings | None = None,
) -> Path:
    if source_dir is None:
        return pack(base_dir, dest, files=[Path(entry_point)])
    home = [] if settings is None else [settings.home]
    return pack(base_dir / source_dir, dest, exclude=home)


def _create(
    client: Client,
    job: _Job,
    settings: Settings,
    progress: bool,
    refused: Callable[[SpecError], SpecError],
    on_warning: Callable[[str], None] | None,
) -> str:
    """Name, stage and create ``job``; ``refused`` turns the server's SpecError into the one raised."""
    if job.job_name is not None:
        _refuse_taken(client, job)
    output = job.output_path or str(client.info()["default_output_uri"])
    for attempt in range(1, NAME_TRIES + 1):
        name = job.job_name or client.new_job_name(job.base_job_name)
        code_uri, uploaded = _stage_code(job, join_uri(output, name), settings, progress)
        try:
            created = client.submit(name, job.fields, code_uri)
        except JobNameTakenError:
            if job.job_name or attempt == NAME_TRIES:
                raise
            continue
        except SpecError as exc:
            if uploaded:
                _discard(code_uri, settings)
            raise refused(exc) from None
        for line in created.get("Warnings") or []:
            (on_warning or _warn)(_one_line(str(line)))
        return name
    raise AssertionError("unreachable")


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    """A server's warning as one bounded line of printable text (no terminal escapes)."""
    shown = "".join(c if c.isprintable() else "?" for c in text[:WARNING_CHARS])
    return shown + ("…" if len(text) > WARNING_CHARS else "")


def _refuse_taken(client: Client, job: _Job) -> None:
    """An explicit ``job_name`` that exists is an error before anything is uploaded under it
    (after the spec's own problems, which come first as they always have)."""
    assert job.job_name is not None
    try:
        client.describe(job.job_name)
    except JobNotFoundError:
        return
    job.validate()
    raise JobNameTakenError(f"a job named {job.job_name!r} already exists")


def _stage_code(job: _Job, prefix: str, settings: Settings, progress: bool) -> tuple[str, bool]:
    """The code's URI, and whether it was uploaded now (rather than named by ``source_dir``)."""
    if job.source_dir is not None and "://" in job.source_dir:
        return _existing_archive(job.source_dir, settings), False
    target = code_uri_for(prefix)
    with tempfile.TemporaryDirectory(prefix="trainops-source-") as tmp:
        archive = _pack(
            job.source_dir,
            job.entry_point,
            job.base_dir,
            Path(tmp) / "sourcedir.tar.gz",
            settings,
        )
        size = archive.stat().st_size
        with TransferBar(size, "uploading source", enabled=progress) as bar:
            store_for(target, settings).upload(archive, target, on_bytes=bar)
    return target, True


def _discard(code_uri: str, settings: Settings) -> None:
    """Remove the source of a job the server refused; failing that only leaves it behind."""
    with contextlib.suppress(TrainopsError, OSError):
        store_for(code_uri, settings).delete(code_uri)


def _existing_archive(uri: str, settings: Settings) -> str:
    """A ``source_dir`` given as a URI names a ready ``.tar.gz``, used as it is."""
    if not uri.endswith((".tar.gz", ".tgz")):
        raise SpecError([("source_dir", f"{uri} is a URI, so it must name a .tar.gz archive")])
    if not store_for(uri, settings).exists(uri):
        raise SpecError([("source_dir", f"no archive at {uri}")])
    return uri
