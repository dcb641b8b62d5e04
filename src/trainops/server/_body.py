"""Reading a request's body within its route's bound, and giving the memory back afterwards.

:func:`read_body` is called only once the route's credential has been checked (``_routing``):
a body whose Content-Length is over the route's bound is refused (413) before a byte of it is
read, and one sent without a length (chunked) is counted as it streams and cut at the bound. It
is gathered into one growing buffer, never a list of pieces joined at the end (two copies). A
client that goes away before its body has all come gets a 400 it never reads, and the server's
log no traceback.

Parsing a large JSON body makes many small objects; once they are freed, CPython hands its
small-object arenas back, but glibc keeps the heap they came from (and each worker thread has
its own arena). :func:`release_memory` asks glibc to return it (``malloc_trim(0)``) after a
request whose body was large, so that one big request does not leave the server hundreds of
megabytes larger for good; ``trainops server`` also keeps glibc to a few heaps
(:func:`limit_malloc_arenas`).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

from starlette.requests import ClientDisconnect, Request

from trainops.server._http import ApiError

__all__ = [
    "MALLOC_ARENAS",
    "TRIM_AFTER_BYTES",
    "limit_malloc_arenas",
    "read_body",
    "release_memory",
    "too_large",
]

#: A body at least this large is followed by :func:`release_memory`.
TRIM_AFTER_BYTES = 1024 * 1024
#: glibc heaps a ``trainops server`` process keeps (glibc's default: 8 per core).
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)


def too_large(limit: int) -> ApiError:
    """The 413 of a body over ``limit`` bytes."""
    return ApiError(
        413,
        "payload_too_large",
        f"the body has more than {limit} bytes, this operation's limit (docs/api.md)",
    )


async def read_body(request: Request, limit: int) -> bytearray:
    """The request's body in one buffer; a 413 before reading when its Content-Length is over
    ``limit``, or as soon as more than ``limit`` bytes have come (a chunked body)."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    body = bytearray()
    try:
        async for part in request.stream():
            if len(body) + len(part) > limit:
                raise too_large(limit)
            body += part
    except ClientDisconnect:  # an agent killed mid-post, say: a 400 nobody reads, no traceback
        raise ApiError(
            400, "client_disconnected", "the client went away before its whole body had come"
        ) from None
    return body


def release_memory(size: int) -> None:
    """After a request whose body had ``size`` bytes: give freed heap back to the system when
    the body was large (glibc only; elsewhere nothing to do)."""
    if size >= TRIM_AFTER_BYTES:
        trim = _malloc_trim()
        if trim is not None:
            trim(0)


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> None:
    """Let glibc keep at most ``count`` heaps (``mallopt(M_ARENA_MAX)``), for a process that
    only serves: each worker thread that parsed a large body would otherwise keep a heap of its
    own, which trimming shrinks but fragmentation keeps partly resident (measured: about 110 MB
    left after four 16 MiB event bodies with glibc's default, about 75 MB with two)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(_M_ARENA_MAX, count)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # the process's own libc
    except (OSError, AttributeError, TypeError):
        return None
    return trim
