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
  that changed is left for its next close.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from trainops._errors import StorageError, TrainopsError
from trainops._settings import Settings
from trainops.agent.reporting._priority import IDLE_SESSION_NICE, lower_session
from trainops.agent.reporting._watch import Event, Inotify, inotify_available, open_for_writing
from trainops.storage import ObjectStore, download_objects, join_uri

__all__ = ["DirectorySync", "SyncResult"]

Signature = tuple[int, int, int]  # (size, mtime_ns, inode)
STOP_TIMEOUT = 300.0  # seconds an in-flight upload may take to finish when the sync stops
SETTLE = 0.02  # seconds to let a burst of events (write tmp, rename into place) arrive
LAUNCH_POLL_SECONDS = 0.1  # how often an empty directory is looked at before its first file


@dataclass(slots=True)
class SyncResult:
    """What one pass changed remotely (relative paths)."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


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

    def upload(self, rel: str, *, previous: Signature | None = None, force: bool = False) -> bool:
        """Upload ``rel`` if it differs from what was uploaded and is finished; True if sent.

        Finished means no process holds it open for writing; where the kernel cannot tell, that
        it did not change since ``previous`` (the signature seen one scan earlier). ``force``
        uploads whatever differs (the script has ended).
        """
        path = self.local_dir / rel
        if not _inside(self.local_dir, path):
            return False  # a symbolic link (or one on its way): never followed, as scans do
        try:
            sig = signature(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if self.known.get(rel) == sig:
            return False
        if not force:
            writing = open_for_writing(path)
            if writing or (writing is None and previous != sig):
                return False

        def unchanged() -> None:
            try:
                now = signature(path)
            except FileNotFoundError:
                now = None
            if now != sig:
                raise SourceChangedError(f"{path}: changed while it was being uploaded")

        try:
            self.store.upload(path, join_uri(self.remote_prefix, rel), verify=unchanged)
        except (StorageError, FileNotFoundError):
            try:
                if signature(path) == sig:
                    raise  # a real failure, not a file that moved on
            except FileNotFoundError:
                pass
            return False  # it changed or went away: its next close or the next scan sees it
        self.known[rel] = sig
        return True

    def delete_vanished_one(self, rel: str) -> list[str]:
        """Delete ``rel``'s remote object if this host put it there and it is gone locally."""
        if not self.propagate_deletes or rel not in self.known:
            return []
        if (self.local_dir / rel).is_file():
            return []  # replaced already (written anew, renamed into place)
        self.store.delete(join_uri(self.remote_prefix, rel))
        del self.known[rel]
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
                gone.append(rel)
        return gone


class DirectorySync:
    """Mirror ``local_dir`` to ``remote_prefix``; see the module docstring for the rules.

    ``on_uploaded`` hears the relative path of each file the background uploader made visible
    (just after it became visible); ``on_error`` hears what went wrong, as a sentence. The
    uploader runs at ``SCHED_IDLE`` with the idle I/O class, or with ``idle=False`` at ``nice``
    with ``SCHED_BATCH`` (see :func:`_lower_priority` for what each costs whom). ``eager``
    starts it with :meth:`start` rather than when the first file appears.
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
        watch: bool | None = None,
        nice: int = 10,
        idle: bool = True,
        eager: bool = False,
    ) -> None:
        self.local_dir = local_dir
        self.remote_prefix = remote_prefix
        self._mirror = Mirror(local_dir, remote_prefix, store, propagate_deletes)
        self._store = store
        self._interval = interval
        self._safety_interval = safety_interval
        self._on_error = on_error
        self._on_uploaded = on_uploaded
        self._watch = inotify_available() if watch is None else watch
        self._nice = nice
        self._idle = idle
        self._eager = eager
        self._previous: dict[str, Signature] = {}
        self._lock = threading.Lock()
        self._worker: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._launcher: threading.Thread | None = None
        self._spawn_lock = threading.Lock()
        self._stopping = threading.Event()

    def restore(self) -> int:
        """Copy every object under the prefix into the local directory; returns how many."""
        objects = self._store.list_objects(self.remote_prefix)
        download_objects(self._store, objects, self.local_dir)
        with self._lock:
            for info in objects:
                self._mirror.known[info.key] = signature(self.local_dir / info.key)
        return len(objects)

    def sync_once(self) -> SyncResult:
        """One pass in this process: upload finished files that changed, propagate deletions."""
        with self._lock:
            current = scan(self.local_dir)
            result = SyncResult()
            for rel in sorted(current):
                if self._mirror.upload(rel, previous=self._previous.get(rel)):
                    result.uploaded.append(rel)
            result.deleted = self._mirror.delete_vanished(set(current))
            self._previous = current
            return result

    def final_sync(self) -> SyncResult:
        """Stop the background uploader and upload everything that differs, finished or not."""
        self.stop()
        with self._lock:
            current = scan(self.local_dir)
            result = SyncResult()
            for rel in sorted(current):
                if self._mirror.upload(rel, force=True):
                    result.uploaded.append(rel)
            result.deleted = self._mirror.delete_vanished(set(current))
            self._previous = current
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
        }
        code = (
            "from trainops.agent.reporting._sync import worker_main; "
            "raise SystemExit(worker_main())"
        )
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

    def stop(self) -> None:
        """Ask the uploader to finish its current upload and exit; wait for it."""
        with self._spawn_lock:
            self._stopping.set()
            worker, self._worker = self._worker, None
        if self._launcher is not None:
            self._launcher.join()
            self._launcher = None
        if worker is None:
            return
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
        if worker.stdout is not None:
            worker.stdout.close()

    def _read_reports(self, worker: subprocess.Popen[bytes]) -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "uploaded" in report:
                    size, mtime, inode = report["sig"]
                    self._mirror.known[report["uploaded"]] = (size, mtime, inode)
                elif "deleted" in report:
                    self._mirror.known.pop(report["deleted"], None)
            if "error" in report:
                self._error(report["error"])
            elif "uploaded" in report and self._on_uploaded is not None:
                self._on_uploaded(report["uploaded"])
        code = worker.wait()
        if code != 0:
            self._error(f"the uploader exited with {code}; what is left uploads when training ends")

    def _error(self, message: str) -> None:
        if self._on_error is not None:
            self._on_error(f"syncing {self.local_dir} to {self.remote_prefix}: {message}")


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

    config = json.loads(sys.stdin.buffer.readline())
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
    out = sys.stdout
    _Uploader(mirror, config, lambda report: _emit(out, report)).run(sys.stdin.fileno())
    return 0


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

    def run(self, stop_fd: int) -> None:
        next_scan = 0.0  # scan at once: files finished before the watch began
        while True:
            now = time.monotonic()
            fds = [stop_fd] + ([self.watcher.fd] if self.watcher else [])
            ready, _w, _x = select.select(fds, [], [], max(0.0, next_scan - now))
            if stop_fd in ready and not os.read(stop_fd, 4096):
                return
            if self.watcher is not None and self.watcher.fd in ready:
                self._take(self.watcher.read(0))
                self._take(self.watcher.read(SETTLE))
            if time.monotonic() >= next_scan:
                self._scan()
                next_scan = time.monotonic() + self.period
            self._upload_pending()

    def _take(self, events: list[Event]) -> None:
        for event in events:
            if event.kind == "closed":
                self.pending.add(event.rel)
            elif event.kind == "removed":
                self._removed(event.rel)
            else:
                self._scan()

    def _scan(self) -> None:
        current = scan(self.mirror.local_dir)
        for rel, sig in current.items():
            if self.mirror.known.get(rel) != sig:
                self.pending.add(rel)
        self._guard(lambda: self._deleted(self.mirror.delete_vanished(set(current))))
        self.previous = current

    def _upload_pending(self) -> None:
        for rel in sorted(self.pending):
            self.pending.discard(rel)
            self._upload_one(rel)

    def _removed(self, rel: str) -> None:
        self.pending.discard(rel)
        self._guard(lambda: self._deleted(self.mirror.delete_vanished_one(rel)))

    def _upload_one(self, rel: str) -> None:
        # An inotify close is proof of a finished write where leases cannot tell.
        previous = self.previous.get(rel)
        if self.watcher is not None:
            try:
                previous = signature(self.mirror.local_dir / rel)
            except FileNotFoundError:
                return
        if self._guard(lambda: self.mirror.upload(rel, previous=previous)):
            self.emit({"uploaded": rel, "sig": list(self.mirror.known[rel])})

    def _deleted(self, gone: list[str]) -> None:
        for rel in gone:
            self.emit({"deleted": rel})

    def _guard(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except (TrainopsError, OSError) as exc:
            self.emit({"error": str(exc)})
            return None
