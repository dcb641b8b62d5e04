"""A job's model and output artifacts, downloaded through the UI: ``GET
/ui/jobs/{job}/artifacts/{artifact}`` (``model`` or ``output``).

The object read is only ever one the job's describe lists (``GET /api/v1/jobs/{name}``'s
``Artifacts``, which the control plane recorded when it merged the job's output) and only under
the job's own output prefix: the request names an artifact, never a path or a URI. It is read
through the server's storage layer a bounded chunk at a time and sent as an attachment of a
type the browser will not render (``application/octet-stream``, ``nosniff``, a policy allowing
nothing).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import anyio.to_thread
from starlette.responses import Response, StreamingResponse

from trainops._errors import StorageError
from trainops.server.ui._layout import SECURITY_HEADERS
from trainops.server.ui._page import UiContext, UiError
from trainops.storage import ObjectStore, join_uri, store_for

__all__ = ["ARTIFACT_PATH", "DOWNLOADABLE", "artifact_response", "artifact_url"]

ARTIFACT_PATH = "/ui/jobs/{job}/artifacts/{artifact}"
#: The artifacts a browser may download: the job's merged model and output archives.
DOWNLOADABLE = ("model", "output")
CHUNK = 1024 * 1024
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HEADERS = {
    **SECURITY_HEADERS,
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Content-Type": "application/octet-stream",
}


def artifact_url(job: str, artifact: str) -> str:
    """The download link of a job's artifact (the job name URL-quoted)."""
    return f"/ui/jobs/{quote(job, safe='')}/artifacts/{quote(artifact, safe='')}"


def artifact_uri(ui: UiContext, job: str, artifact: str) -> str:
    """The recorded URI of ``job``'s ``artifact``: :class:`UiError` (404) when the job has none
    such, or when the record is not under the job's own output prefix."""
    if artifact not in DOWNLOADABLE:
        raise UiError(f"artifact {artifact[:40]!r} is not one of {', '.join(DOWNLOADABLE)}", 404)
    described = ui.jobs.describe_job(job)
    found = [a["Uri"] for a in described.get("Artifacts") or [] if a.get("Name") == artifact]
    if not found:
        raise UiError(f"job {job[:80]!r} has no {artifact} artifact (yet)", 404)
    own = join_uri(ui.controller.job(job).output_prefix) + "/"
    if not found[0].startswith(own) or "/../" in found[0][len(own) - 1 :]:
        raise UiError(f"job {job[:80]!r}'s {artifact} artifact is not under its output", 404)
    return str(found[0])


async def artifact_response(ui: UiContext, job: str, artifact: str) -> Response:
    """The artifact as an attachment, streamed; the first chunk is read before the answer
    starts, so a missing object is an error page rather than a cut download."""
    uri = await anyio.to_thread.run_sync(artifact_uri, ui, job, artifact)
    store = store_for(uri, ui.settings)
    try:
        first = await anyio.to_thread.run_sync(store.get_range, uri, 0, CHUNK)
    except (StorageError, OSError):
        raise UiError(f"job {job[:80]!r}'s {artifact} artifact cannot be read", 404) from None
    headers = {**_HEADERS, "Content-Disposition": f'attachment; filename="{_filename(uri)}"'}
    return StreamingResponse(_chunks(store, uri, first), headers=headers)


async def _chunks(store: ObjectStore, uri: str, first: bytes) -> AsyncIterator[bytes]:
    chunk, at = first, 0
    while chunk:
        yield chunk
        if len(chunk) < CHUNK:
            return
        at += len(chunk)
        chunk = await anyio.to_thread.run_sync(store.get_range, uri, at, at + CHUNK)


def _filename(uri: str) -> str:
    """The object's own file name where it is plain, else ``artifact``."""
    name = uri.rsplit("/", 1)[-1]
    return name if _SAFE_NAME.fullmatch(name) else "artifact"
