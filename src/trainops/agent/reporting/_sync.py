"""Keeping a local directory and an object-storage prefix in step while a job runs.

Checkpoints follow SageMaker's semantics: restored on every host at start, new or changed files
uploaded continuously, local deletions propagated. Only objects this host restored or uploaded
are ever deleted, so hosts sharing a prefix do not remove each other's files.

While the script runs, the uploading happens in a separate, lowest-priority process
(``SCHED_IDLE`` and the idle I/O class; ``nice`` + ``SCHED_BATCH`` where the kernel lacks them) so
that it takes CPU and disk time only where the script leaves some, and the script's step time
barely moves. That process learns of finished files from inotify (``IN_CLOSE_WRITE``,
``IN_MOVED_TO``, recursively, new subdirectories included) and scans the tree every
``safety_interval`` seconds in case an event was lost; where inotify is unavailable it scans every
``interval`` seconds. It reports each upload and deletion back on a pipe, so this process always
knows what the remote prefix holds.

No torn object is ever visible under its final name:

- a file some process still holds open for writing is not uploaded (Linux read leases tell; where
  they cannot, a scan-found file must be unchanged since the previous scan);
- an upload reads the file and checks that its size, mtime and inode did not change before the
  object becomes visible (``ObjectStore.upload(verify=...)``: file:// renames a temporary file
  into place, s3:// completes the multipart upload or sends the single PUT only then); a file
  that changed is left for its next close;
- with a manifest (checkpoints: ``manifest=(host, attempt)``), a file still open for writing when
  the script's processes are killed (:meth:`DirectorySync.note_writers`, called just before the
  SIGKILL) is never uploaded, and the restore checks every listed file (see ``_manifest``);
- with a manifest and inotify, a file that a process of the script may have been writing when it
  died of a signal the agent did not send (:meth:`DirectorySync.note_death`: the out-of-memory
  killer, a crash) is never uploaded either: that death closed it as an ordinary close would.
  The uploader judges it as it hears of the death (it waits :data:`DEATH_WINDOW` after each
  close; the agent learns of a death in milliseconds), again before each later upload and at its
  stop: a file written in place (its last event a close, not a rename into place), changed since
  its upload, and last written at most :data:`TORN_WINDOW` before the death was seen (or up to
  :data:`DEATH_WINDOW` after: a held script dies a moment after the holder whose death is seen).

Nothing goes wrong silently: a failed upload is reported through ``on_error`` once (until the
sync recovers, which ``on_recovered`` hears), and so is an upload that made no progress for
``stall_seconds``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from trainops._errors import StorageError, TrainopsError
from trainops._settings import Settings
from trainops.agent.reporting._manifest import (
    RESERVED_DIR,
    FileEntry,
    Listing,
    file_entry,
    is_reserved,
    read_listings,
    write_manifest,
)
from trainops.agent.reporting._priority import IDLE_SESSION_NICE, lower_session
from trainops.agent.reporting._watch import Event, Inotify, inotify_available, open_for_writing
from trainops.storage import ObjectInfo, ObjectStore, download_objects, join_uri

__all__ = ["DirectorySync", "RestoreReport", "SyncResult", "SyncedFile"]

Signature = tuple[int, int, int]  # (size, mtime_ns, inode)
STOP_TIMEOUT = 300.0  # seconds an in-flight upload may take to finish when the sync stops
SETTLE = 0.02  # seconds to let a burst of events (write tmp, rename into place) arrive
LAUNCH_POLL_SECONDS = 0.1  # how often an empty directory is looked at before its first file
STALL_SECONDS = 120.0  # an upload that moved no byte for this long is reported as stalled
# A closed file is uploaded once it has been closed this long with its agent still there: a
# host killed whole (agent and script at once) closes the script's half-written file as its
# writer dies, and that close must not pass for a finished write (the agent's end is seen first).
DEATH_WINDOW = 0.25
# A file written in place, last written this long (or less) before a process of the script died of
# a signal, may have been torn by that death, which closed whatever it held open.
TORN_WINDOW = 1.0
RETRY_SECONDS = 2.0  # how soon a failed upload is tried again (the uploader's next scan)
PROGRESS_SECONDS = 1.0  # how often the uploader says how far an upload has got


@dataclass(frozen=True, slots=True)
class SyncedFile:
    """One file the background uploader made visible: its listing (with a manifest), when its
    write began as the uploader saw it (its creation, or that of the name it was written under
    before a rename into place; None where unseen), and how long its upload took."""

    rel: str
    entry: FileEntry | None
    first_seen: float | None
    upload_seconds: float | None


@dataclass(slots=True)
class SyncResult:
    """What one pass changed remotely (relative paths)."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    # What a final sync left behind: relative path -> why (still being written when the
    # processes were killed, or its upload failed).
    left: dict[str, str] = field(default_factory=dict)
    # Of those, the ones a script process's death by a signal may have torn: relative path ->
    # the signal's name (``SIGKILL``).
    torn: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # how long the pass took


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What a restore did: the files and bytes restored, the files it skipped (each with why),
    the newest listed file restored (its path and listing), and unreadable manifests."""

    files: int
    bytes: int
    skipped: dict[str, str]
    newest: tuple[str, Listing] | None
    problems: list[str]


class SourceChangedError(StorageError):
    """The local file changed while it was being uploaded; it will be uploaded again."""


class Mirror:
    """What the remote prefix holds of ``local_dir`` (``known``), and the moves that change it."""

    def __init__(
        self, local_dir: Path, remote_prefix: str, store: ObjectStore, propagate_deletes: bool
    ) -> None:
        self.local_dir = local_dir
        self.remote_prefix = remote_prefix
        self.store = store
        self.propagate_deletes = propagate_deletes
        self.known: dict[str, Signature] = {}
        # With a manifest: (host, attempt) it is written as, each known file's entry, and the
        # files never to upload (open for writing when the script's processes were killed).
        self.manifest: tuple[str, int] | None = None
        self.entries: dict[str, FileEntry] = {}
        self.excluded: set[str] = set()
        # Versions listed as pending before their upload: file -> (signature, entry). One stays
        # listed until that file's next upload succeeds (a failed upload may still have landed).
        self.announced: dict[str, tuple[Signature, FileEntry]] = {}

    def uploadable(self, rel: str) -> bool:
        """Whether ``rel`` may be uploaded at all (not reserved, not left torn by a kill)."""
        return self.manifest is None or (rel not in self.excluded and not is_reserved(rel))

    def write_manifest(self) -> None:
        """List every known file in this host's manifest (after they are all visible), and the
        announced versions as pending."""
        if self.manifest is not None:
            host, attempt = self.manifest
            listed = {rel: e for rel, e in self.entries.items() if rel in self.known}
            pending = {rel: entry for rel, (_sig, entry) in self.announced.items()}
            write_manifest(self.store, self.remote_prefix, host, attempt, listed, pending)

    def announce(
        self,
        rels: list[str],
        *,
        previous: dict[str, Signature] | None = None,
        force: bool = False,
    ) -> list[str]:
        """Before uploading ``rels``: list the version of each that :meth:`upload` would send
        as pending in the manifest (one write for all), so that a death after an upload and
        before the next manifest leaves an object the manifest names. Returns those announced.
        ``previous`` and ``force`` are as for :meth:`upload`."""
        if self.manifest is None:
            return []
        fresh, before = [], dict(self.announced)
        for rel in rels:
            sig = self._ready(rel, (previous or {}).get(rel), force=force)
            if sig is None or self._announced(rel, sig) is not None:
                continue
            try:
                entry = file_entry(self.local_dir / rel)
                if signature(self.local_dir / rel) != sig:
                    continue  # it moved on while read: its next close or scan sees it
            except (FileNotFoundError, NotADirectoryError):
                continue
            self.announced[rel] = (sig, entry)
            fresh.append(rel)
        if fresh:
            try:
                self.write_manifest()
            except BaseException:
                self.announced = before  # not listed: not to be uploaded until it is
                raise
        return fresh

    def _announced(self, rel: str, sig: Signature) -> FileEntry | None:
        """The pending entry of ``rel``'s version ``sig``, if the manifest lists it."""
        announced = self.announced.get(rel)
        return announced[1] if announced is not None and announced[0] == sig else None

    def _ready(self, rel: str, previous: Signature | None, *, force: bool) -> Signature | None:
        """``rel``'s signature if it is to be uploaded now (see :meth:`upload`), else None."""
        path = self.local_dir / rel
        if not _inside(self.local_dir, path) or not self.uploadable(rel):
            return None  # a symbolic link (or one on its way): never followed, as scans do
        try:
            sig = signature(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if self.known.get(rel) == sig:
            return None
        if not force:
            writing = open_for_writing(path)
            if writing or (writing is None and previous != sig):
                return None
        return sig

    def upload(
        self,
        rel: str,
        *,
        previous: Signature | None = None,
        force: bool = False,
        on_bytes: Callable[[int], None] | None = None,
    ) -> bool:
        """Upload ``rel`` if it differs from what was uploaded and is finished; True if sent.

        Finished means no process holds it open for writing; where the kernel cannot tell, that
        it did not change since ``previous`` (the signature seen one scan earlier). ``force``
        uploads whatever differs (the script has ended). With a manifest, the version sent is
        first listed as pending (see :meth:`announce`; done here unless done already).
        """
        path = self.local_dir / rel
        sig = self._ready(rel, previous, force=force)
        if sig is None:
            return False
        entry = None
        if self.manifest is not None:
            self.announce([rel], previous={rel: sig}, force=force)
            entry = self._announced(rel, sig)
            if entry is None:
                return False  # it changed while being read: its next close or scan sees it

        def unchanged() -> None:
            try:
                now = signature(path)
            except FileNotFoundError:
                now = None
            if now != sig:
                raise SourceChangedError(f"{path}: changed while it was being uploaded")

        try:
            # Read before the upload: a change in between shows in ``unchanged``'s signature.
            self.store.upload(path, join_uri(self.remote_prefix, rel), on_bytes, verify=unchanged)
        except (StorageError, FileNotFoundError):
            try:
                if signature(path) == sig:
                    raise  # a real failure, not a file that moved on
            except FileNotFoundError:
                pass
            return False  # it changed or went away: its next close or the next scan sees it
        self.known[rel] = sig
        if entry is not None:
            self.entries[rel] = entry
            del self.announced[rel]  # listed under files from the next manifest on
        return True

    def delete_vanished_one(self, rel: str) -> list[str]:
        """Delete ``rel``'s remote object if this host put it there and it is gone locally."""
        if not self.propagate_deletes or rel not in self.known:
            return []
        if (self.local_dir / rel).is_file():
            return []  # replaced already (written anew, renamed into place)
        self.store.delete(join_uri(self.remote_prefix, rel))
        del self.known[rel]
        self.entries.pop(rel, None)
        self.announced.pop(rel, None)
        return [rel]

    def delete_vanished(self, present: set[str] | None = None) -> list[str]:
        """Delete the remote objects of known files that no longer exist locally."""
        if not self.propagate_deletes:
            return []
        gone = []
        for rel in sorted(self.known):
            exists = rel in present if present is not None else (self.local_dir / rel).is_file()
            if not exists:
                self.store.delete(join_uri(self.remote_prefix, rel))
                del self.known[rel]
                self.entries.pop(rel, None)
                self.announced.pop(rel, None)
                gone.append(rel)
        return gone


class DirectorySync:
    """Mirror ``local_dir`` to ``remote_prefix``; see the module docstring for the rules.

    ``on_uploaded`` hears the relative path of each file the background uploader made visible
    (just after it became visible), ``on_synced`` the same as a :class:`SyncedFile`;
    ``on_error`` hears what went wrong, as a sentence, once until the sync recovers
    (``on_recovered`` then hears what it uploaded). The uploader runs at ``SCHED_IDLE`` with the
    idle I/O class, or with ``idle=False`` at ``nice`` with ``SCHED_BATCH`` (see
    :func:`_lower_priority` for what each costs whom). ``eager`` starts it with :meth:`start`
    rather than when the first file appears. ``manifest=(host, attempt)``
    keeps that host's checkpoint manifest (see ``_manifest``).
    """

    def __init__(
        self,
        local_dir: Path,
        remote_prefix: str,
        store: ObjectStore,
        *,
        propagate_deletes: bool,
        interval: float = 1.0,
        safety_interval: float = 10.0,
        on_error: Callable[[str], None] | None = None,
        on_uploaded: Callable[[str], None] | None = None,
        on_recovered: Callable[[str], None] | None = None,
        on_synced: Callable[[SyncedFile], None] | None = None,
        watch: bool | None = None,
        nice: int = 10,
        idle: bool = True,
        eager: bool = False,
        manifest: tuple[str, int] | None = None,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        self.local_dir = local_dir
        self.remote_prefix = remote_prefix
        self._mirror = Mirror(local_dir, remote_prefix, store, propagate_deletes)
        self._mirror.manifest = manifest
        self._store = store
        self._interval = interval
        self._safety_interval = safety_interval
        self._on_error = on_error
        self._on_uploaded = on_uploaded
        self._on_recovered = on_recovered
        self._on_synced = on_synced
        self._upload_began: dict[str, float] = {}  # file -> when its upload began (monotonic)
        self._watch = inotify_available() if watch is None else watch
        self._nice = nice
        self._idle = idle
        self._eager = eager
        self._stall_seconds = stall_seconds
        self._previous: dict[str, Signature] = {}
        self._lock = threading.Lock()
        self._worker: subprocess.Popen[bytes] | None = None
        self._worker_ready = threading.Event()  # the uploader said it has started (``ready``)
        self._dismissed: int | None = None  # the pid of an uploader stopped before it started
        self._reader: threading.Thread | None = None
        self._launcher: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._spawn_lock = threading.Lock()
        self._stopping = threading.Event()
        self._failing: set[str] = set()  # the failures reported since the last upload
        self._in_flight: tuple[str, float] | None = None  # (file, when it last moved a byte)
        self._stalled: str | None = None  # the upload reported stalled
        self.errors = 0  # failures the uploader reported, repeats included
        self._torn: dict[str, str] = {}  # file -> the signal whose death may have torn it
        # file -> when the uploader first saw its current version being written
        self.first_seen: dict[str, float] = {}
        self.last_restore: RestoreReport | None = None

    def restore(self) -> int:
        """Copy every object under the prefix into the local directory; returns how many.

        With a manifest, a listed file that matches no listing is not restored, and the
        reserved folder never is; :attr:`last_restore` says what was done.
        """
        # The prefix is a folder, listed as one: never an object of its bare name.
        objects = self._store.list_objects(self.remote_prefix.rstrip("/") + "/")
        if self._mirror.manifest is None:
            download_objects(self._store, objects, self.local_dir)
            with self._lock:
                for info in objects:
                    self._mirror.known[info.key] = signature(self.local_dir / info.key)
            return len(objects)
        files = [info for info in objects if not is_reserved(info.key)]
        listings, problems = read_listings(self._store, objects)
        download_objects(self._store, files, self.local_dir)
        report = self._check_restored(files, listings, problems)
        self.last_restore = report
        return report.files

    def _check_restored(
        self, files: list[ObjectInfo], listings: dict[str, list[Listing]], problems: list[str]
    ) -> RestoreReport:
        skipped: dict[str, str] = {}
        newest: tuple[str, Listing] | None = None
        kept = size = 0
        for info in files:
            path = self.local_dir / info.key
            entry = file_entry(path)
            listed = listings.get(info.key, [])
            match = next((x for x in listed if _same(x.entry, entry)), None)
            if listed and match is None:
                path.unlink()
                skipped[info.key] = _mismatch(listed, entry)
                continue
            if match is not None and (newest is None or match.entry.mtime > newest[1].entry.mtime):
                newest = (info.key, match)
            kept, size = kept + 1, size + entry.size
            with self._lock:
                self._mirror.known[info.key] = signature(path)
                self._mirror.entries[info.key] = entry if match is None else match.entry
        return RestoreReport(kept, size, skipped, newest, problems)

    def sync_once(self) -> SyncResult:
        """One pass in this process: upload finished files that changed, propagate deletions."""
        with self._lock:
            current = scan(self.local_dir)
            result = SyncResult()
            self._mirror.announce(sorted(current), previous=self._previous)
            for rel in sorted(current):
                if self._mirror.upload(rel, previous=self._previous.get(rel)):
                    result.uploaded.append(rel)
            result.deleted = self._mirror.delete_vanished(set(current))
            self._previous = current
            if result.uploaded or result.deleted:
                self._mirror.write_manifest()
            return result

    def note_writers(self) -> list[str]:
        """The script's processes are about to be killed: every file some process still holds
        open for writing is left torn by the kill, so it is never uploaded (its last finished
        version, if any, stays). Returns those files; call it just before the SIGKILL."""
        writing = [
            rel
            for rel in sorted(scan(self.local_dir))
            if self._mirror.uploadable(rel) and open_for_writing(self.local_dir / rel)
        ]
        if not writing:
            return []
        with self._lock:
            self._mirror.excluded.update(writing)
        self._tell_worker({"exclude": writing})
        return writing

    def note_death(self, signum: int, when: float) -> None:
        """A process of the script died of signal ``signum`` that the agent did not send (seen
        at Unix time ``when``): the uploader leaves what that death may have torn (see the
        module docstring) and says which, so the last sync leaves it too."""
        if self._mirror.manifest is not None:
            self._tell_worker({"died": [signum, when]})

    def _tell_worker(self, message: dict[str, Any]) -> None:
        worker = self._worker
        if worker is not None and worker.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # the uploader is gone or going
                worker.stdin.write(json.dumps(message).encode() + b"\n")
                worker.stdin.flush()

    @property
    def torn(self) -> dict[str, str]:
        """The files left because a death by a signal may have torn them -> the signal's name."""
        with self._lock:
            return dict(self._torn)

    @property
    def excluded(self) -> set[str]:
        """The files never uploaded because a kill left them torn."""
        with self._lock:
            return set(self._mirror.excluded)

    def final_sync(self, *, raise_failures: bool = True) -> SyncResult:
        """Stop the background uploader and upload everything that differs, finished or not
        (except what a kill left torn); a file whose upload fails is left, with why, and the
        others still go. The manifest is written last. Then, with ``raise_failures``, a failed
        upload raises :class:`StorageError` naming each (else :attr:`SyncResult.left` says)."""
        started = time.monotonic()
        self._hasten()
        self.stop()
        with self._lock:
            current = scan(self.local_dir)
            result = SyncResult()
            with contextlib.suppress(StorageError, OSError):  # then each upload announces itself
                self._mirror.announce(sorted(current), force=True)
            for rel in sorted(current):
                if rel in self._torn:
                    result.torn[rel] = self._torn[rel]
                    result.left[rel] = (
                        "it was written in place just before a process of the script died of "
                        f"{self._torn[rel]}, which may have left it half-written"
                    )
                    continue
                if rel in self._mirror.excluded:
                    result.left[rel] = "it was still being written when the processes were killed"
                    continue
                try:
                    if self._mirror.upload(rel, force=True):
                        result.uploaded.append(rel)
                except (StorageError, OSError) as exc:
                    result.left[rel] = f"its upload failed: {exc}"
            try:
                result.deleted = self._mirror.delete_vanished(set(current))
                self._mirror.write_manifest()
            except (StorageError, OSError) as exc:
                result.left[RESERVED_DIR] = f"its upload failed: deletions or the manifest: {exc}"
            self._previous = current
        result.seconds = time.monotonic() - started
        failed = {rel: why for rel, why in result.left.items() if why.startswith("its upload")}
        if failed and raise_failures:
            raise StorageError("; ".join(f"{rel}: {why}" for rel, why in sorted(failed.items())))
        return result

    @property
    def worker_pid(self) -> int | None:
        """The background uploader's process id while one runs (for accounting its CPU)."""
        worker = self._worker
        return None if worker is None else worker.pid

    @property
    def known(self) -> dict[str, Signature]:
        """Relative path -> signature of every file the remote prefix holds as uploaded."""
        with self._lock:
            return dict(self._mirror.known)

    @property
    def entries(self) -> dict[str, FileEntry]:
        """Relative path -> manifest entry of every known file (with a manifest)."""
        with self._lock:
            return {rel: e for rel, e in self._mirror.entries.items() if rel in self._mirror.known}

    def start(self) -> None:
        """Start the background uploader process (see the module docstring): at once if
        ``eager`` (a directory that will be written, such as a job's checkpoints: the uploader's
        start-up is paid before training rather than in the middle of it, where it could stall
        a step), otherwise once there is something to upload: a directory that stays empty
        (most jobs' ``output/intermediate``) never costs a process."""
        self.local_dir.mkdir(parents=True, exist_ok=True)
        self._stopping.clear()
        if self._eager or _has_entries(self.local_dir):
            self._spawn()
            return
        self._launcher = threading.Thread(target=self._launch_when_used, name="sync-launch",
                                          daemon=True)  # fmt: skip
        self._launcher.start()

    def _launch_when_used(self) -> None:
        while not self._stopping.wait(LAUNCH_POLL_SECONDS):
            if _has_entries(self.local_dir):
                self._spawn()
                return

    def _spawn(self) -> None:
        with self._spawn_lock:
            if self._stopping.is_set() or self._worker is not None:
                return
            self._spawn_worker()

    def _spawn_worker(self) -> None:
        with self._lock:
            entries = {rel: list(astuple(e)) for rel, e in self._mirror.entries.items()}
            excluded = sorted(self._mirror.excluded)
        config = {
            "local_dir": str(self.local_dir),
            "remote_prefix": self.remote_prefix,
            "propagate_deletes": self._mirror.propagate_deletes,
            "interval": self._interval,
            "safety_interval": self._safety_interval,
            "watch": self._watch,
            "nice": self._nice,
            "idle": self._idle,
            "known": self.known,
            "manifest": self._mirror.manifest,
            "entries": entries,
            "excluded": excluded,
        }
        code = (
            "from trainops.agent.reporting._sync import worker_main; "
            "raise SystemExit(worker_main())"
        )
        self._worker_ready.clear()
        self._worker = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **self._store.child_env()},
            start_new_session=True,  # an autogroup of its own: see _lower_priority
        )
        # At once, not from the worker itself: its interpreter's start-up and imports (a few
        # hundred milliseconds of CPU, when the first checkpoint appears mid-training) must not
        # run at the script's priority.
        base = os.getpriority(os.PRIO_PROCESS, 0)
        _lower_priority(self._nice, idle=self._idle, pid=self._worker.pid, base=base)
        config["base_nice"] = base
        assert self._worker.stdin is not None and self._worker.stdout is not None
        self._worker.stdin.write(json.dumps(config).encode() + b"\n")
        self._worker.stdin.flush()
        self._reader = threading.Thread(
            target=self._read_reports, args=(self._worker,), name="sync-reports", daemon=True
        )
        self._reader.start()
        self._watchdog = threading.Thread(target=self._watch_stalls, name="sync-stalls",
                                          daemon=True)  # fmt: skip
        self._watchdog.start()

    def _hasten(self) -> None:
        """Give the uploader the agent's own priority for the upload it is finishing: the last
        sync comes once the script has ended, so there is no step left to protect, and at idle
        priority a busy machine starved it for seconds (measured: 3-18 s at a load of 12-15)."""
        worker = self._worker
        if worker is not None and worker.poll() is None:
            _raise_priority(worker.pid, os.getpriority(os.PRIO_PROCESS, 0))

    def stop(self) -> None:
        """Ask the uploader to finish its current upload and exit; wait for it. An uploader
        that has not said it started is killed instead: it has uploaded nothing yet, and its
        interpreter's start-up (a few hundred milliseconds of CPU at idle priority, which a busy
        machine may not have given it yet) is not worth waiting for. (Had it started a moment
        ago, the upload it began is abandoned unfinished, which is never visible, see above, and
        the last sync uploads that file itself.)"""
        with self._spawn_lock:
            self._stopping.set()
            worker, self._worker = self._worker, None
        if self._launcher is not None:
            self._launcher.join()
            self._launcher = None
        if worker is None:
            return
        if not self._worker_ready.is_set():
            self._dismissed = worker.pid  # (before the kill: its reader must not call it a failure)
            worker.kill()
        assert worker.stdin is not None
        with contextlib.suppress(OSError):
            worker.stdin.close()  # end of input is the stop signal
        try:
            worker.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        if self._reader is not None:
            self._reader.join()
            self._reader = None
        if self._watchdog is not None:
            self._watchdog.join()
            self._watchdog = None
        if worker.stdout is not None:
            worker.stdout.close()

    def _read_reports(self, worker: subprocess.Popen[bytes]) -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            self._take_report(report)
        code = worker.wait()
        if code != 0 and worker.pid != self._dismissed:
            self._error(f"the uploader exited with {code}; what is left uploads when training ends")

    def _take_report(self, report: dict[str, Any]) -> None:
        if "ready" in report:
            self._worker_ready.set()
            return
        with self._lock:
            if "uploading" in report:
                self._upload_began[str(report["uploading"])] = time.monotonic()
            if "uploading" in report or "progress" in report:
                self._in_flight = (str(report.get("uploading", report.get("progress"))),
                                   time.monotonic())  # fmt: skip
            elif "done" in report:
                self._in_flight = None
            elif "seen" in report:
                self.first_seen[str(report["seen"])] = float(report["at"])
            elif "torn" in report:
                name = _signal_name(int(report["signal"]))
                for rel in report["torn"]:
                    self._mirror.excluded.add(str(rel))
                    self._torn[str(rel)] = name
            elif "uploaded" in report:
                size, mtime, inode = report["sig"]
                self._mirror.known[report["uploaded"]] = (size, mtime, inode)
                if report.get("entry"):
                    self._mirror.entries[report["uploaded"]] = FileEntry(*report["entry"])
            elif "deleted" in report:
                self._mirror.known.pop(report["deleted"], None)
                self._mirror.entries.pop(report["deleted"], None)
        if "error" in report:
            self._error(report["error"])
        elif "uploaded" in report:
            self._recovered(f"uploaded {report['uploaded']}")
            if self._on_uploaded is not None:
                self._on_uploaded(report["uploaded"])
            if self._on_synced is not None:
                self._on_synced(self._synced(report))

    def _synced(self, report: dict[str, Any]) -> SyncedFile:
        rel = str(report["uploaded"])
        began = self._upload_began.pop(rel, None)
        entry = report.get("entry")
        first = report.get("first_seen")
        return SyncedFile(
            rel,
            None if not entry else FileEntry(*entry),
            None if first is None else float(first),
            None if began is None else time.monotonic() - began,
        )

    def _watch_stalls(self) -> None:
        period = max(0.05, min(self._stall_seconds / 4, 5.0))
        while not self._stopping.wait(period):
            with self._lock:
                flight = self._in_flight
            if flight is None:
                continue
            rel, moved = flight
            idle = time.monotonic() - moved
            if idle >= self._stall_seconds and self._stalled != rel:
                self._stalled = rel
                self._error(f"the upload of {rel} has stalled: no progress for {idle:.1f} s")

    def _recovered(self, what: str) -> None:
        with self._lock:
            was, self._failing, self._stalled = bool(self._failing), set(), None
        if was and self._on_recovered is not None:
            self._on_recovered(
                f"syncing {self.local_dir} to {self.remote_prefix} recovered: {what}"
            )

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors += 1
            repeated = message in self._failing
            self._failing.add(message)
        if not repeated and self._on_error is not None:
            self._on_error(f"syncing {self.local_dir} to {self.remote_prefix}: {message}")


def _signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (the agent's parts import down: not the contract's own reader)."""
    with contextlib.suppress(ValueError):
        return signal.Signals(number).name
    return f"signal {number}"


def _same(listed: FileEntry, found: FileEntry) -> bool:
    return listed.size == found.size and listed.sha256 == found.sha256


def _mismatch(listed: list[Listing], found: FileEntry) -> str:
    first = listed[0]
    if all(x.entry.size != found.size for x in listed):
        what = f"{found.size} bytes where the manifest of {first.host} lists {first.entry.size}"
    else:
        what = f"its checksum differs from the manifest of {first.host}"
    return f"{what} (torn or changed after it was listed)"


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path`` is a regular entry of ``root`` reached without any symbolic link."""
    try:
        return not path.is_symlink() and path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def _has_entries(root: Path) -> bool:
    try:
        with os.scandir(root) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def scan(root: Path) -> dict[str, Signature]:
    found: dict[str, Signature] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            try:
                found[path.relative_to(root).as_posix()] = signature(path)
            except FileNotFoundError:
                continue
    return found


def signature(path: Path) -> Signature:
    stat = path.stat()
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


# The uploader process --------------------------------------------------------------------------


def worker_main() -> int:
    """Entry point of the uploader process: config on stdin, reports on stdout, EOF stops it."""
    from trainops.storage import store_for

    stop_fd = sys.stdin.fileno()
    first, rest = _read_line(stop_fd)
    config = json.loads(first)
    base = config.get("base_nice")
    _lower_priority(
        int(config["nice"]), idle=bool(config["idle"]), base=None if base is None else int(base)
    )
    # A writer opening a file in the instant we hold its read lease makes the kernel send us
    # SIGIO (whose default is to terminate); we release the lease at once anyway.
    if hasattr(signal, "SIGIO"):
        signal.signal(signal.SIGIO, signal.SIG_IGN)
    store = store_for(config["remote_prefix"], _background(Settings.load()))
    mirror = Mirror(
        Path(config["local_dir"]), config["remote_prefix"], store, config["propagate_deletes"]
    )
    mirror.known = {rel: (sig[0], sig[1], sig[2]) for rel, sig in config["known"].items()}
    manifest = config.get("manifest")
    mirror.manifest = None if manifest is None else (str(manifest[0]), int(manifest[1]))
    mirror.entries = {rel: FileEntry(*e) for rel, e in config.get("entries", {}).items()}
    mirror.excluded = set(config.get("excluded", []))
    out = sys.stdout
    uploader = _Uploader(mirror, config, lambda report: _emit(out, report))
    _emit(out, {"ready": True})  # from here on, a stop waits for the upload in flight
    uploader.run(stop_fd, rest)
    return 0


def _read_line(fd: int) -> tuple[bytes, bytes]:
    """The first line from ``fd`` and what was read after it (the agent's first messages)."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    line, _newline, rest = data.partition(b"\n")
    return line, rest


def _background(settings: Settings) -> Settings:
    """The settings for uploads made while the script runs: ``transfer.sync_part_concurrency``
    parts in flight. Traced on bench/checkpoint_sync.py: four parts in flight kept more work
    runnable beside the script (the uploader's threads and, with the S3 server on the same host,
    the server's) for no shorter lag, the uploader getting CPU only in the script's pauses."""
    transfer = settings.transfer
    lanes = replace(transfer, part_concurrency=transfer.sync_part_concurrency)
    return replace(settings, transfer=lanes)


def _lower_priority(nice: int, *, idle: bool = True, pid: int = 0, base: int | None = None) -> None:
    """Take CPU and disk time only where the script leaves some; for ``pid`` (0: this process),
    before it starts threads: threads started later inherit all of it.

    ``idle`` (where the kernel has it): ``SCHED_IDLE`` and the idle I/O class. A waking script
    thread preempts the uploader at once, and a core running only the uploader counts as idle
    when the script's threads are placed; the idle I/O class puts the uploader's own disk writes
    (a ``file://`` store's fsync) behind everyone else's. The price: on a host whose cores are
    all busy the uploader runs only in their pauses. Otherwise (or where ``SCHED_IDLE`` is
    missing) ``nice`` and ``SCHED_BATCH``: a share of the CPU however busy the host, but a woken
    script thread may wait for the uploader's time slice to end. The niceness set is ``base``
    (default: this process's own) plus ``nice``, so applying it twice changes nothing.

    Either is relative to the threads of the same session only, where the kernel groups
    processes by session (autogroups): the uploader is started in a session of its own, and where
    ``pid`` leads its session this also puts the session's autogroup at nice 19 (with ``idle``;
    else at the niceness set) through :func:`~trainops.agent.reporting._priority.lower_session`,
    since the script, in its own session, would otherwise meet the uploader's session at equal
    weight.
    """
    own = os.getpriority(os.PRIO_PROCESS, 0) if base is None else base
    niceness = min(19, own + nice)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
    lower_session(pid, IDLE_SESSION_NICE if idle else niceness)  # a session leader's only
    for name in ("SCHED_IDLE", "SCHED_BATCH") if idle else ("SCHED_BATCH",):
        policy = getattr(os, name, None)
        if policy is None:
            continue
        try:
            os.sched_setscheduler(pid, policy, os.sched_param(0))
            break
        except OSError:
            continue
    if not idle:
        return
    import psutil  # here: only the uploader (and the agent that starts it) needs it

    idle_io = getattr(psutil, "IOPRIO_CLASS_IDLE", None)
    if idle_io is not None:
        with contextlib.suppress(OSError, psutil.Error):
            psutil.Process(pid or os.getpid()).ionice(idle_io)


def _raise_priority(pid: int, nice: int) -> None:
    """Undo :func:`_lower_priority` for ``pid`` as far as the kernel lets this process (raising
    a priority may need privileges an agent lacks: then the uploader stays as it was)."""
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]  # no /proc: the main thread only
    for tid in threads:  # each thread has its own policy and niceness
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    lower_session(pid, nice)
    import psutil

    best_effort = getattr(psutil, "IOPRIO_CLASS_BE", None)
    if best_effort is not None:
        with contextlib.suppress(OSError, psutil.Error):
            psutil.Process(pid).ionice(best_effort)


def _emit(out: IO[str], report: dict[str, Any]) -> None:
    out.write(json.dumps(report) + "\n")
    out.flush()


class _Uploader:
    """The loop of the uploader process."""

    def __init__(
        self, mirror: Mirror, config: dict[str, Any], emit: Callable[[dict[str, Any]], None]
    ) -> None:
        self.mirror = mirror
        self.emit = emit
        self.watcher: Inotify | None = None
        if config["watch"]:
            try:
                self.watcher = Inotify(mirror.local_dir)
            except OSError as exc:
                emit({"error": f"inotify unavailable ({exc}); scanning instead"})
        self.period = float(config["safety_interval"] if self.watcher else config["interval"])
        self.previous: dict[str, Signature] = {}
        self.pending: set[str] = set()
        self.pending_since: dict[str, float] = {}  # file -> when it became pending (monotonic)
        self.parent: int | None = None  # the agent's pid, once the loop runs
        self.first_seen: dict[str, float] = {}
        self.changed = False  # something was uploaded or deleted since the manifest was written
        self.moved_in: set[str] = set()  # files whose last event was a rename into place
        self.deaths: list[tuple[int, float]] = []  # (signal, when) of the script's deaths heard
        self.failed = False  # an upload failed: the next scan comes sooner

    def run(self, stop_fd: int, messages: bytes = b"") -> None:
        next_scan = 0.0  # scan at once: files finished before the watch began
        self.parent = os.getppid()
        messages = self._messages(messages)
        while True:
            now = time.monotonic()
            fds = [stop_fd] + ([self.watcher.fd] if self.watcher else [])
            wake = min([next_scan, *(t + DEATH_WINDOW for t in self.pending_since.values())])
            ready, _w, _x = select.select(fds, [], [], max(0.0, wake - now))
            if stop_fd in ready:
                data = os.read(stop_fd, 65536)
                if not data:
                    self._judge()  # closes that came after the death's word: the last sync's
                    return
                messages = self._messages(messages + data)
            if self.watcher is not None and self.watcher.fd in ready:
                self._take(self.watcher.read(0))
                self._take(self.watcher.read(SETTLE))
            if time.monotonic() >= next_scan:
                self._scan()
                next_scan = time.monotonic() + self.period
            if self._agent_gone():
                return
            self._upload_pending()
            if self.failed:
                self.failed = False
                next_scan = min(next_scan, time.monotonic() + RETRY_SECONDS)

    def _messages(self, buffer: bytes) -> bytes:
        """Take in the agent's messages (``{"exclude": [...]}``, ``{"died": [signal, when]}``);
        returns a partial last line."""
        *lines, rest = buffer.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError, TypeError, AttributeError, IndexError):
                message = json.loads(line)
                excluded = message.get("exclude") or []
                self.mirror.excluded.update(str(rel) for rel in excluded)
                self.pending.difference_update(self.mirror.excluded)
                if "died" in message:
                    self._died(int(message["died"][0]), float(message["died"][1]))
        return rest

    def _died(self, signum: int, when: float) -> None:
        """A process of the script died of ``signum`` at ``when``: leave every file it may have
        been writing (see the module docstring), now and as later closes come in. Without
        inotify a rename into place cannot be told from a write in place: nothing is judged."""
        if self.watcher is not None and self.mirror.manifest is not None:
            self.deaths.append((signum, when))
            self._judge()

    def _judge(self) -> None:
        """Leave, and say, every file a death heard of may have torn (its closes read first)."""
        if not self.deaths or self.watcher is None:
            return
        self._take(self.watcher.read(0))
        torn: dict[int, list[str]] = {}
        for rel, sig in sorted(scan(self.mirror.local_dir).items()):
            if rel in self.moved_in or self.mirror.known.get(rel) == sig:
                continue
            signum = self._torn_by(sig)
            if signum is not None and self.mirror.uploadable(rel):
                torn.setdefault(signum, []).append(rel)
        for signum, rels in torn.items():
            self.mirror.excluded.update(rels)
            self.pending.difference_update(rels)
            self.emit({"torn": rels, "signal": signum})

    def _torn_by(self, sig: Signature) -> int | None:
        """The signal of a death this version was last written just before (or as it was seen:
        a held script dies a moment after its holder), else None."""
        written = sig[1] / 1e9
        for signum, when in self.deaths:
            if when - TORN_WINDOW <= written <= when + DEATH_WINDOW:
                return signum
        return None

    def _seen(self, rel: str) -> None:
        if rel not in self.first_seen:
            self.first_seen[rel] = time.time()
            self.emit({"seen": rel, "at": self.first_seen[rel]})

    def _take(self, events: list[Event]) -> None:
        for event in events:
            if event.kind == "created":
                self._seen(event.rel)
            elif event.kind == "closed":
                if event.moved:
                    self.moved_in.add(event.rel)
                else:
                    self.moved_in.discard(event.rel)
                began = self.first_seen.pop(event.source, None) if event.source else None
                if began is not None and event.rel not in self.first_seen:
                    # written under another name, renamed into place: its write began there
                    self.first_seen[event.rel] = began
                    self.emit({"seen": event.rel, "at": began})
                self._seen(event.rel)
                self.pending.add(event.rel)
            elif event.kind == "removed":
                self.moved_in.discard(event.rel)
                self._removed(event.rel)
            else:
                self._scan()

    def _scan(self) -> None:
        current = scan(self.mirror.local_dir)
        for rel, sig in current.items():
            if self.mirror.known.get(rel) != sig and self.mirror.uploadable(rel):
                self._seen(rel)
                self.pending.add(rel)
        self._guard(lambda: self._deleted(self.mirror.delete_vanished(set(current))))
        self.previous = current

    def _agent_gone(self) -> bool:
        """Whether the agent that started this uploader has gone (this process was handed to
        another parent): nothing more is uploaded or listed then, whatever closed as it went."""
        return self.parent is not None and os.getppid() != self.parent

    def _upload_pending(self) -> None:
        if self.pending:
            self._judge()  # a close that came after a death's word is judged before its upload
        now = time.monotonic()
        ready = []
        for rel in sorted(self.pending):
            since = self.pending_since.setdefault(rel, now)
            if now - since >= DEATH_WINDOW:
                ready.append(rel)  # else closed too recently to tell a finished write from death
        if ready and not self._agent_gone():
            previous = {rel: sig for rel in ready if (sig := self._previous_of(rel)) is not None}
            self.emit({"uploading": ready[0]})  # announcing is part of the upload: watched too
            self._guard(lambda: self.mirror.announce(ready, previous=previous))
            self.emit({"done": ready[0]})
        for rel in ready:
            if self._agent_gone():
                return
            self.pending.discard(rel)
            self.pending_since.pop(rel, None)
            self._upload_one(rel)
        if self._agent_gone():
            return
        if self.changed and self.mirror.manifest is not None:
            self.changed = False
            if self._guard(self.mirror.write_manifest) is False:
                self.changed = True

    def _removed(self, rel: str) -> None:
        self.pending.discard(rel)
        self._guard(lambda: self._deleted(self.mirror.delete_vanished_one(rel)))

    def _previous_of(self, rel: str) -> Signature | None:
        """The signature ``rel`` must still have to count as finished (see ``Mirror.upload``).
        An inotify close is proof of a finished write where leases cannot tell."""
        if self.watcher is None:
            return self.previous.get(rel)
        try:
            return signature(self.mirror.local_dir / rel)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _upload_one(self, rel: str) -> None:
        previous = self._previous_of(rel)
        if (self.watcher is not None and previous is None) or not self.mirror.uploadable(rel):
            return
        self.emit({"uploading": rel})
        progress = _Progress(rel, self.emit)
        sent = self._guard(lambda: self.mirror.upload(rel, previous=previous, on_bytes=progress))
        self.emit({"done": rel})
        if sent:
            self.changed = True
            entry = self.mirror.entries.get(rel)
            self.emit(
                {
                    "uploaded": rel,
                    "sig": list(self.mirror.known[rel]),
                    "entry": None if entry is None else list(astuple(entry)),
                    "first_seen": self.first_seen.pop(rel, None),
                }
            )

    def _deleted(self, gone: list[str]) -> None:
        for rel in gone:
            self.changed = True
            self.first_seen.pop(rel, None)
            self.emit({"deleted": rel})

    def _guard(self, action: Callable[[], Any]) -> Any:
        """``action()``; a failure is reported (and retried soon) and gives ``False``."""
        try:
            return action()
        except (TrainopsError, OSError) as exc:
            self.failed = True
            self.emit({"error": str(exc)})
            return False


class _Progress:
    """An upload's byte count, reported at most every :data:`PROGRESS_SECONDS` (a stall shows
    as no report)."""

    def __init__(self, rel: str, emit: Callable[[dict[str, Any]], None]) -> None:
        self.rel = rel
        self.emit = emit
        self.sent = 0
        self.last = time.monotonic()

    def __call__(self, count: int) -> None:
        self.sent += count
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.emit({"progress": self.rel, "bytes": self.sent})
