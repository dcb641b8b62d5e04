"""A job's debug-output prefix copied, step by step, into a local folder a custom rule reads.

A custom rule runs confined (``_custom``): no credentials, no network, reading only the folders
it is given. Where the job's tensors are in object storage (``s3://``), the control plane,
which holds the store's credentials, copies the job's own prefix into the rule's scratch folder
on each tick (:meth:`PrefixMirror.refresh`), and the rule reads that folder as a local trial. The
rule therefore gets the job's tensors and nothing else: no key, no request of its own.

The copy keeps the reader's guarantees (reference/sagemaker.md §5.5): a collections file
whenever it is new or changed; an index file only once the event file it names is here (so a
reader never finds an index whose event file is missing); ``training_job_end.ts`` only once a
refresh found it already there the refresh before and copied every index of that listing (a
listing is paged: the marker could be listed after index pages read before the host's final
pass). Only the names a trial reads are copied (``collections/...``, ``index/<n>/<step>_<worker>
.json`` and the ``events/...`` file each names, the end marker), each through a temporary
hidden name and a rename (``ObjectStore.download``), so a reader never sees a torn file.

Everything is bounded, the prefix being written by the job: an object over
:data:`MAX_OBJECT_BYTES` or a copy over :data:`MAX_TOTAL_BYTES` in all is an error naming it;
one refresh copies at most :data:`MAX_FILES_PER_REFRESH` files (the rest come next tick), and
a listing of more than :data:`MAX_OBJECTS` objects is an error. Sizes are checked on the listing
and again on the copy (an object replaced by a bigger one between the two is removed and is an
error too).
"""

from __future__ import annotations

import re
from pathlib import Path

from trainops.storage import ObjectInfo, ObjectStore, download_objects

__all__ = [
    "MAX_FILES_PER_REFRESH",
    "MAX_OBJECTS",
    "MAX_OBJECT_BYTES",
    "MAX_TOTAL_BYTES",
    "MirrorError",
    "PrefixMirror",
]

MAX_OBJECT_BYTES = 1 << 30
MAX_TOTAL_BYTES = 16 << 30
MAX_OBJECTS = 1_000_000
MAX_FILES_PER_REFRESH = 4_000
END_MARKER = "training_job_end.ts"
_INDEX = re.compile(r"^index/\d{9}/(\d{12})_([A-Za-z0-9_.-]{1,200})\.json$")
_COLLECTIONS = re.compile(r"^collections/\d{9}/[A-Za-z0-9_.-]{1,200}\.json$")


class MirrorError(RuntimeError):
    """The prefix cannot be copied within the bounds (one line saying what)."""


class PrefixMirror:
    """Copy ``prefix`` (a URI of ``store``) into ``dest`` as it grows; one caller at a time."""

    def __init__(
        self,
        prefix: str,
        store: ObjectStore,
        dest: Path,
        *,
        max_object_bytes: int = MAX_OBJECT_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        max_files: int = MAX_FILES_PER_REFRESH,
    ) -> None:
        self.prefix = prefix.rstrip("/") + "/"
        self.store = store
        self.dest = dest
        self.max_object_bytes = max_object_bytes
        self.max_total_bytes = max_total_bytes
        self.max_files = max_files
        self.copied: dict[str, int] = {}  # key -> size copied
        self.total_bytes = 0
        self._end_listed = False

    def refresh(self) -> int:
        """Copy what is new; returns how many files were copied."""
        listed = {info.key: info for info in self._list()}
        budget = self.max_files
        collections = [
            info
            for key, info in sorted(listed.items())
            if _COLLECTIONS.match(key) and self.copied.get(key) != info.size
        ][:budget]
        self._copy(collections)
        budget -= len(collections)
        indexes = [
            (info, listed.get(_event_of(key)))
            for key, info in sorted(listed.items())
            if _INDEX.match(key) and key not in self.copied
        ]
        ready = [(index, event) for index, event in indexes if event is not None]
        ready = ready[: max(0, budget // 2)]
        events = [event for _, event in ready if self.copied.get(event.key) != event.size]
        self._copy(events)
        self._copy([index for index, _ in ready])
        done = len(collections) + len(events) + len(ready)
        everything = len(ready) == len(indexes)
        if END_MARKER in listed and self._end_listed and everything:
            marker = self.dest / END_MARKER
            if not marker.exists():
                marker.write_bytes(b"")
                done += 1
        self._end_listed = END_MARKER in listed
        return done

    def _list(self) -> list[ObjectInfo]:
        found = self.store.list_objects(self.prefix)
        if len(found) > MAX_OBJECTS:
            raise MirrorError(f"{self.prefix}: more than {MAX_OBJECTS} objects")
        return found

    def _copy(self, objects: list[ObjectInfo]) -> None:
        for info in objects:
            if info.size > self.max_object_bytes:
                raise MirrorError(
                    f"{info.uri}: {info.size} bytes, over the {self.max_object_bytes}-byte limit"
                )
        added = sum(info.size - self.copied.get(info.key, 0) for info in objects)
        if self.total_bytes + added > self.max_total_bytes:
            raise MirrorError(
                f"{self.prefix}: the job's tensors pass {self.max_total_bytes} bytes in all"
            )
        if not objects:
            return
        self.dest.mkdir(parents=True, exist_ok=True)
        download_objects(self.store, objects, self.dest)
        for info in objects:  # as copied: an object may have been replaced since it was listed
            size = (self.dest / info.key).stat().st_size
            self.total_bytes += size - self.copied.get(info.key, 0)
            self.copied[info.key] = size
            if size > self.max_object_bytes:
                (self.dest / info.key).unlink()
                raise MirrorError(
                    f"{info.uri}: {size} bytes, over the {self.max_object_bytes}-byte limit"
                )


def _event_of(index_key: str) -> str:
    found = _INDEX.match(index_key)
    assert found is not None
    step, worker = found.groups()
    return f"events/{step}/{step}_{worker}.tfevents"
