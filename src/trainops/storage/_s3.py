"""``s3://`` object storage over obstore (Rust ``object_store``), against AWS or any S3 endpoint.

Transfers run in obstore's Rust runtime with the GIL released, so parallel requests really run in
parallel: big uploads are multipart with ``transfer.concurrency`` parts in flight, big downloads
are ranged GETs written in place with ``os.pwrite``, each range pinned to the object's ETag so an
object overwritten mid-download fails loudly instead of mixing two versions. Everything buffered
is drawn from one :class:`ByteBudget` of ``transfer.memory`` bytes per store.

A single PUT or a completed multipart upload is atomic in S3, so uploads never expose a torn
object. obstore is imported lazily: a bare install works without it until an s3:// URI is used.
Credentials live only inside the obstore client; they are never part of a repr or an error.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from trainops._errors import StorageError
from trainops._settings import S3Settings, Settings, TransferSettings
from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, split_uri
from trainops.storage._budget import ByteBudget

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

__all__ = ["S3Store", "s3_store"]

T = TypeVar("T")
_MISSING_BUCKET = "NoSuchBucket"
_CHANGED_RETRIES = 3
# Ranged downloads stream in pieces of this size straight to their place in the file: far less
# CPU than collecting each range into one buffer first, and only this much held per range.
_STREAM_CHUNK = 1 << 20
# ...and each piece goes to the page cache in writes of this size. Measured on the benchmark VM
# (ext4, Linux 6.18): 1 MiB writes cost about twice the kernel CPU of 64 KiB ones, most of it in
# the copy into freshly allocated large page-cache folios; 32-256 KiB all cost the same.
_WRITE_SIZE = 64 << 10
_READ_PIECE = 1 << 20  # obstore gathers the pieces into parts; no 16 MiB reads and buffers


class ObjectChangedError(StorageError):
    """The object was overwritten while its parts were being read."""


class S3Store(ObjectStore):
    """Objects in buckets; endpoint and credentials come from :class:`S3Settings`."""

    scheme = "s3"

    def __init__(self, settings: S3Settings, transfer: TransferSettings | None = None) -> None:
        self._settings = settings
        self._transfer = transfer or TransferSettings()
        self._budget = ByteBudget(self._transfer.memory)
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3Store(endpoint_url={self._settings.endpoint_url!r})"

    def child_env(self) -> dict[str, str]:
        return {**self._settings.client_env(), **self._transfer.env()}

    @property
    def workers(self) -> int:
        return self._transfer.concurrency

    @property
    def budget(self) -> ByteBudget:
        """The byte budget every buffered part and small object of this store is drawn from."""
        return self._budget

    def _list(self, prefix: str) -> list[ObjectInfo]:
        bucket, key = _split(prefix)
        key = key.strip("/")
        try:
            found = self._list_under(bucket, key)
            # Nothing under it: the prefix may name one object, unless it ends in "/" (a folder:
            # a job's key on the served S3 may list its folder but not read its bare name).
            if found or not key or prefix.endswith("/"):
                return found
            meta = _obs().head(self._client(bucket), key)
        except FileNotFoundError:
            return []
        except Exception as exc:
            if _MISSING_BUCKET in str(exc):
                return []
            raise StorageError(f"{prefix}: cannot list ({_describe(exc)})") from None
        return [ObjectInfo(uri=prefix, key=key.rsplit("/", 1)[-1], size=int(meta["size"]))]

    def _list_after(self, prefix: str, start_after: str) -> list[ObjectInfo]:
        bucket, key = _split(prefix)
        key = key.strip("/")
        offset = f"{key}/{start_after}" if key else start_after
        try:
            return self._list_under(bucket, key, offset=offset)
        except FileNotFoundError:
            return []
        except Exception as exc:
            if _MISSING_BUCKET in str(exc):
                return []
            raise StorageError(f"{prefix}: cannot list ({_describe(exc)})") from None

    def _list_under(self, bucket: str, key: str, offset: str | None = None) -> list[ObjectInfo]:
        client = self._client(bucket)
        cut = len(key) + 1 if key else 0
        out = []
        listing = _obs().list(client, prefix=key or None, offset=offset, chunk_size=1000)
        for batch in listing:
            for meta in batch:
                path = meta["path"]
                if path.endswith("/"):
                    continue  # a "directory marker" some tools create; not an object
                out.append(ObjectInfo(f"s3://{bucket}/{path}", path[cut:], int(meta["size"])))
        return out

    def _download(self, uri: str, dest: Path, size: int | None = None) -> None:
        bucket, key = _split(uri)
        client = self._client(bucket)
        part = self._transfer.part_size
        etag = None
        if size is None or size > part:
            meta = self._call(uri, "download", lambda: _obs().head(client, key))
            size, etag = int(meta["size"]), meta.get("e_tag")
        if size <= part:
            self._download_whole(uri, client, key, dest)
            return
        for attempt in range(_CHANGED_RETRIES):
            try:
                self._download_ranges(uri, client, key, dest, size, etag)
                return
            except ObjectChangedError:
                if attempt == _CHANGED_RETRIES - 1:
                    raise
            meta = self._call(uri, "download", lambda: _obs().head(client, key))
            size, etag = int(meta["size"]), meta.get("e_tag")

    def _download_whole(self, uri: str, client: Any, key: str, dest: Path) -> None:
        """One GET; an object that grew past a part since it was listed is streamed in parts."""
        part = self._transfer.part_size
        result = self._call(uri, "download", lambda: _obs().get(client, key))
        size = int(result.meta["size"])
        with self._budget.hold(min(size, part)), dest.open("wb") as out:
            if size <= part:
                _write_pieces(out, memoryview(self._call(uri, "download", result.bytes)))
            else:
                self._call(uri, "download", lambda: _write_stream(out, result))

    def _download_ranges(
        self, uri: str, client: Any, key: str, dest: Path, size: int, etag: str | None
    ) -> None:
        part = self._transfer.part_size
        ranges = [(start, min(start + part, size)) for start in range(0, size, part)]
        options: dict[str, Any] = {"if_match": etag} if etag else {}

        def fetch(span: tuple[int, int]) -> None:
            start, end = span
            with self._budget.hold(min(end - start, 2 * _STREAM_CHUNK)):
                got = self._call(uri, "download", lambda: write_range(start, end))
            if got != end - start:
                raise StorageError(f"{uri}: range {start}-{end} returned {got} bytes")

        def write_range(start: int, end: int) -> int:
            offset = start
            result = _obs().get(client, key, options={**options, "range": (start, end)})
            for chunk in result.stream(_STREAM_CHUNK):
                _pwrite_all(fd, memoryview(chunk), offset)
                offset += len(chunk)
            return offset - start

        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            _run_parallel(fetch, ranges, min(self._transfer.part_concurrency, len(ranges)))
        finally:
            os.close(fd)

    def _upload(
        self,
        src: Path,
        uri: str,
        on_bytes: ByteCallback | None,
        verify: Callable[[], None] | None,
    ) -> None:
        bucket, key = _split(uri)
        client = self._client(bucket)
        size = src.stat().st_size
        part = self._transfer.part_size
        if size <= part:
            with self._budget.hold(size):
                data = src.read_bytes()
                if verify is not None:
                    verify()
                self._call(
                    uri, "upload", lambda: _obs().put(client, key, data, use_multipart=False)
                )
            if on_bytes is not None:
                on_bytes(len(data))
            return
        lanes = self._parallelism((size + part - 1) // part)
        # A Path is read by obstore itself (least CPU); a generator lets us report progress and
        # verify after the last byte was read: the multipart upload completes only after that.
        body: Path | Iterator[bytes] = src
        if on_bytes is not None or verify is not None:
            body = _chunks(src, min(part, _READ_PIECE), on_bytes, verify)
        # obstore buffers up to `lanes` parts in flight plus the one being filled.
        with self._budget.hold((lanes + 1) * part):
            self._call(
                uri,
                "upload",
                lambda: _obs().put(
                    client, key, body, use_multipart=True, chunk_size=part, max_concurrency=lanes
                ),
            )

    def _put_bytes(self, uri: str, data: bytes) -> None:
        bucket, key = _split(uri)
        client = self._client(bucket)
        self._call(uri, "write", lambda: _obs().put(client, key, data, use_multipart=False))

    def _get_bytes(self, uri: str) -> bytes:
        bucket, key = _split(uri)
        client = self._client(bucket)
        return bytes(self._call(uri, "read", lambda: _obs().get(client, key).bytes()))

    def _get_range(self, uri: str, start: int, end: int) -> bytes:
        bucket, key = _split(uri)
        client = self._client(bucket)
        with self._budget.hold(end - start):
            try:
                get = _obs().get_range
                return bytes(
                    self._call(uri, "read", lambda: get(client, key, start=start, end=end))
                )
            except StorageError:
                meta = self._call(uri, "read", lambda: _obs().head(client, key))
                if start >= int(meta["size"]):
                    return b""  # a range past the end is empty, as on file://
                raise

    def _delete(self, uri: str) -> None:
        bucket, key = _split(uri)
        client = self._client(bucket)
        try:
            self._call(uri, "delete", lambda: _obs().delete(client, key))
        except StorageError:
            if self._exists(uri):
                raise

    def _exists(self, uri: str) -> bool:
        bucket, key = _split(uri)
        client = self._client(bucket)
        try:
            self._call(uri, "stat", lambda: _obs().head(client, key))
        except StorageError as exc:
            if "no such object" in str(exc) or _MISSING_BUCKET in str(exc):
                return False
            raise
        return True

    def _parallelism(self, parts: int) -> int:
        """Upload parts in flight for one object: as configured, cut to fit the budget."""
        slots = max(1, self._transfer.memory // self._transfer.part_size - 1)
        return max(1, min(self._transfer.part_concurrency, slots, parts))

    def _client(self, bucket: str) -> Any:
        with self._lock:
            client = self._clients.get(bucket)
            if client is None:
                client = self._clients[bucket] = _make_client(self._settings, bucket)
            return client

    def _call(self, uri: str, what: str, action: Callable[[], T]) -> T:
        try:
            return action()
        except StorageError:
            raise
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None
        except Exception as exc:  # obstore raises its own error types, one per failure kind
            kind = type(exc).__name__
            if kind == "NotFoundError":
                raise StorageError(f"{uri}: no such object") from None
            if kind == "PreconditionError":
                raise ObjectChangedError(f"{uri}: the object changed during the {what}") from None
            raise StorageError(f"{uri}: cannot {what} ({_describe(exc)})") from None


def s3_store(settings: Settings) -> S3Store:
    """The ``s3`` entry of the scheme table: a store with the settings' S3 and transfer parts."""
    return S3Store(settings.s3, settings.transfer)


def _split(uri: str) -> tuple[str, str]:
    _scheme, rest = split_uri(uri)
    bucket, _sep, key = rest.partition("/")
    if not bucket:
        raise StorageError(f"{uri!r}: no bucket name")
    problem = _bucket_problem(bucket)
    if problem is not None:
        raise StorageError(
            f"{uri!r}: {bucket[:80]!r} is not an S3 bucket name: {problem} "
            "(S3's bucket naming rules)"
        )
    return bucket, key


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _bucket_problem(name: str) -> str | None:
    """Which of S3's naming rules for general purpose buckets ``name`` breaks, or ``None``.

    Checked here so that a bad name is refused before any request, with the rule it breaks,
    instead of by the server (or, on some endpoints, as a path-style URL it builds from it).
    """
    if not 3 <= len(name) <= 63:
        return f"it must be 3 to 63 characters long, not {len(name)}"
    if not _BUCKET.fullmatch(name):
        return (
            "it may hold only lower-case letters, digits, dots and hyphens, "
            "and must begin and end with a letter or digit"
        )
    if ".." in name:
        return "it may not hold two dots in a row"
    if _IPV4.fullmatch(name):
        return "it may not look like an IP address"
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"it may not begin with {prefix!r}"
    for suffix in _RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"it may not end with {suffix!r}"
    return None


def _obs() -> Any:
    try:
        import obstore
    except ImportError:
        raise StorageError("s3:// needs the s3 extra: pip install 'trainops[s3]'") from None
    return obstore


def _make_client(settings: S3Settings, bucket: str) -> Any:
    _obs()
    from obstore.store import S3Store as ObstoreS3

    config: dict[str, Any] = {"region": settings.region or "us-east-1"}
    if settings.endpoint_url:
        config["endpoint"] = settings.endpoint_url
        config["virtual_hosted_style_request"] = False
    if settings.access_key_id:
        config["access_key_id"] = settings.access_key_id
    if settings.secret_access_key:
        config["secret_access_key"] = settings.secret_access_key
    client_options: ClientConfig = {
        "allow_http": (settings.endpoint_url or "").startswith("http://")
    }
    retry: RetryConfig = {"max_retries": 3, "retry_timeout": timedelta(seconds=60)}
    try:
        return ObstoreS3(bucket, client_options=client_options, retry_config=retry, **config)
    except Exception as exc:
        raise StorageError(f"s3://{bucket}: cannot set up a client ({_describe(exc)})") from None


def _chunks(
    src: Path, size: int, on_bytes: ByteCallback | None, verify: Callable[[], None] | None
) -> Iterator[bytes]:
    """The file in ``size`` pieces; ``on_bytes`` hears each piece once the uploader took it.

    ``verify`` runs after the last piece was read; if it raises, obstore aborts the multipart
    upload, so the object never appears.
    """
    with src.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk
            if on_bytes is not None:
                on_bytes(len(chunk))
    if verify is not None:
        verify()


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data[:_WRITE_SIZE], offset)
        data, offset = data[written:], offset + written


def _write_stream(out: BinaryIO, result: Any) -> None:
    for chunk in result.stream(_STREAM_CHUNK):
        _write_pieces(out, memoryview(chunk))


def _write_pieces(out: BinaryIO, data: memoryview) -> None:
    for start in range(0, len(data), _WRITE_SIZE):
        out.write(data[start : start + _WRITE_SIZE])


def _run_parallel(action: Callable[[T], None], items: list[T], lanes: int) -> None:
    if lanes <= 1:
        for item in items:
            action(item)
        return
    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="s3-part") as pool:
        futures = [pool.submit(action, item) for item in items]
        try:
            for future in futures:
                future.result()
        finally:
            for future in futures:
                future.cancel()


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
