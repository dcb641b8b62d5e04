"""``s3://`` object storage over s3fs, against AWS or any S3-compatible endpoint.

A single PUT (or a completed multipart upload) is atomic in S3, so uploads never expose a torn
object. s3fs is imported lazily: a bare install works without it until an s3:// URI is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops._errors import StorageError
from trainops._settings import S3Settings
from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, split_uri

__all__ = ["S3Store"]


class S3Store(ObjectStore):
    """Objects in buckets; ``endpoint_url`` and credentials come from :class:`S3Settings`."""

    scheme = "s3"

    def __init__(self, settings: S3Settings) -> None:
        self._settings = settings
        self._fs: Any = None

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = _make_fs(self._settings)
        return self._fs

    def _list(self, prefix: str) -> list[ObjectInfo]:
        _s, path = split_uri(prefix)
        try:
            if self.fs.isfile(path):
                size = int(self.fs.info(path)["size"])
                return [ObjectInfo(uri=prefix, key=path.rsplit("/", 1)[-1], size=size)]
            found = self.fs.find(path.rstrip("/"), detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:  # s3fs raises botocore/aiohttp errors of many types
            raise StorageError(f"{prefix}: cannot list ({_describe(exc)})") from None
        root = path.rstrip("/") + "/"
        out = []
        for key, info in found.items():
            if info.get("type") == "directory" or not key.startswith(root):
                continue
            out.append(ObjectInfo(uri=f"s3://{key}", key=key[len(root) :], size=int(info["size"])))
        return out

    def _download(self, uri: str, dest: Path) -> None:
        self._call(uri, "download", lambda p: self.fs.get_file(p, str(dest)))

    def _upload(self, src: Path, uri: str) -> None:
        self._call(uri, "upload", lambda p: self.fs.put_file(str(src), p))

    def _upload_reporting(self, src: Path, uri: str, on_bytes: ByteCallback) -> None:
        callback = _byte_callback(on_bytes)
        self._call(uri, "upload", lambda p: self.fs.put_file(str(src), p, callback=callback))

    def _put_bytes(self, uri: str, data: bytes) -> None:
        self._call(uri, "write", lambda p: self.fs.pipe_file(p, data))

    def _get_bytes(self, uri: str) -> bytes:
        data: bytes = self._call(uri, "read", lambda p: self.fs.cat_file(p))
        return data

    def _delete(self, uri: str) -> None:
        try:
            self._call(uri, "delete", lambda p: self.fs.rm_file(p))
        except StorageError:
            if self._exists(uri):
                raise

    def _exists(self, uri: str) -> bool:
        exists: bool = self._call(uri, "stat", lambda p: self.fs.isfile(p))
        return exists

    def _call(self, uri: str, what: str, action: Any) -> Any:
        _s, path = split_uri(uri)
        try:
            return action(path)
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None
        except Exception as exc:  # s3fs raises botocore/aiohttp errors of many types
            raise StorageError(f"{uri}: cannot {what} ({_describe(exc)})") from None


def _make_fs(settings: S3Settings) -> Any:
    try:
        import s3fs
    except ImportError:
        raise StorageError("s3:// needs the s3 extra: pip install 'trainops[s3]'") from None
    client_kwargs: dict[str, Any] = {}
    if settings.region:
        client_kwargs["region_name"] = settings.region
    return s3fs.S3FileSystem(
        key=settings.access_key_id,
        secret=settings.secret_access_key,
        endpoint_url=settings.endpoint_url,
        client_kwargs=client_kwargs,
        use_listings_cache=False,
        skip_instance_cache=True,
    )


def _byte_callback(on_bytes: ByteCallback) -> Any:
    """An fsspec callback that turns its running value into deltas for ``on_bytes``."""
    from fsspec.callbacks import Callback

    class _Deltas(Callback):  # type: ignore[misc]
        sent = 0

        def call(self, hook_name: str | None = None, **kwargs: Any) -> None:
            delta = int(self.value) - self.sent
            if delta > 0:
                self.sent += delta
                on_bytes(delta)

    return _Deltas()


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
