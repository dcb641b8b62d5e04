"""The script's process: started in its own session, its output captured, stopped by process
group (SIGTERM, then SIGKILL once the grace period has passed), and always reaped.

Output capture never waits for what is done with the output: one thread only moves raw chunks
of both pipes (``os.read`` of up to 256 KiB, from pipes enlarged to 1 MiB where Linux allows),
in the order the kernel saw them written (see ``_pipes``), into a bounded queue, and one more
thread splits them into lines, decodes them (UTF-8, invalid bytes
replaced, a trailing ``\r`` dropped) and hands them to the line sink. Lines are kept whole up to
:data:`MAX_LINE_BYTES` (16 MiB); a longer run of bytes without a newline is passed on in pieces
of that size. A last line without a newline is passed on at the end of the stream.

What the script started outside its session (a ``setsid`` daemon) is reached through its
:class:`~trainops.agent.supervision._reaper.ProcessTree` (a cgroup where possible, an
environment marker always): signalled with the group, and killed once the script has ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from trainops.agent.reporting._hostlog import LineSink
from trainops.agent.supervision._holder_fork import ForkedHolder
from trainops.agent.supervision._pipes import read_pipes
from trainops.agent.supervision._reaper import MARKER_VARIABLE, ProcessTree, new_marker

__all__ = ["MAX_LINE_BYTES", "ScriptProcess", "Spawn"]

# How a command is started, where not by a Popen of its own: (argv, cwd, env, tree) -> the
# process to supervise, in a session of its own, stdout and stderr pipes; the command starts
# in ``tree``'s cgroup, if it has one: forked into it, or ``tree.adopt`` called with the pid
# of the process that forks it before it does (the host's namespace holder does either).
Spawn = Callable[
    [Sequence[str], Path, Mapping[str, str], ProcessTree],
    "subprocess.Popen[bytes] | ForkedHolder",
]

MAX_LINE_BYTES = 16 * 1024 * 1024
READ_BYTES = 256 * 1024
PIPE_BYTES = 1024 * 1024
COALESCE_SECONDS = 0.01
# A 1 MiB pipe fills in ~40 ms at 25 MB/s (a script printing 500,000 short lines a second).
READ_PAUSE_SECONDS = 0.002
QUEUED_CHUNKS = 256  # at most 64 MiB of output waiting to be split into lines
TAIL_LINES = 200
READER_JOIN_SECONDS = 5.0
FINISH_POLL_SECONDS = 0.1


class ScriptProcess:
    """One running command and the threads that read its stdout and stderr."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        on_line: LineSink,
        marker: str | None = None,
        use_cgroup: bool = True,
        spawn: Spawn | None = None,
    ) -> None:
        self.argv = list(argv)
        self._spawn = spawn
        self._cwd = cwd
        self.marker = marker or new_marker("trainops")
        self._use_cgroup = use_cgroup
        self._tree: ProcessTree | None = None
        self._env = {**env, MARKER_VARIABLE: self.marker}
        self._on_line = on_line
        self._proc: subprocess.Popen[bytes] | ForkedHolder | None = None
        self._readers: list[threading.Thread] = []
        self._chunks: queue.Queue[tuple[str, bytes] | None] = queue.Queue(QUEUED_CHUNKS)
        self._put_back: list[tuple[str, bytes] | None] = []  # taken from the queue too early
        self._splitter = threading.Thread(target=self._split, name="agent-lines", daemon=True)
        self._watcher: threading.Thread | None = None
        self._kill_at: float | None = None
        self._exited = threading.Event()
        self._exit_lock = threading.Lock()
        self._on_exit: list[Callable[[], None]] | None = []
        self._after_exit: list[Callable[[], None]] = []  # told once wait() sees the exit
        self._before_kill: list[Callable[[], None]] = []  # told just before a stop's SIGKILL
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
        # (signal, Unix time the exit was seen) once it has died of a signal, whoever sent it;
        # set before the exit listeners hear of it
        self.killed_by: tuple[int, float] | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def pgid(self) -> int:
        # start_new_session makes the child the leader of its own process group.
        return self._popen.pid

    @property
    def stopping(self) -> bool:
        return self._kill_at is not None

    def start(self) -> None:
        """Start the command; raises ``OSError`` when it cannot be executed."""
        tree = ProcessTree(self.marker, use_cgroup=self._use_cgroup)
        try:
            if self._spawn is not None:
                self._proc = self._spawn(self.argv, self._cwd, self._env, tree)
            else:
                self._proc = subprocess.Popen(
                    self.argv,
                    cwd=self._cwd,
                    env=self._env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
                tree.adopt(self._proc.pid)
        except OSError:
            tree.kill_all()  # nothing to kill; removes the cgroup
            raise
        self._tree = tree
        self._splitter.start()
        pipes: dict[int, str] = {}
        for name, stream in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr)):
            assert stream is not None
            pipes[os.dup(stream.fileno())] = name
            stream.close()
        enlarged = [_enlarge_pipe(fd) for fd in pipes]
        pause = READ_PAUSE_SECONDS if all(enlarged) else 0.0
        reader = threading.Thread(
            target=read_pipes,
            args=(pipes, self._put_chunk, READ_BYTES, pause),
            name="agent-output",
            daemon=True,
        )
        reader.start()
        self._readers.append(reader)
        watcher = threading.Thread(target=self._watch, name="agent-waitid", daemon=True)
        watcher.start()
        self._watcher = watcher

    def capture_threads(self) -> list[int]:
        """Native ids of the threads that read the output and learn of the exit: the ones
        that keep the script from waiting, which must never wait behind other work."""
        threads = [*self._readers, *([self._watcher] if self._watcher else [])]
        return [t.native_id for t in threads if t.native_id is not None]

    def wait(self, timeout: float) -> int | None:
        """The exit code once the process has ended, else ``None`` after ``timeout`` seconds.

        Also delivers the SIGKILL of a stop whose grace period has run out.
        """
        if self._exited.wait(timeout):
            return self._reap()
        if self._kill_at is not None and time.monotonic() >= self._kill_at:
            listeners, self._before_kill = self._before_kill, []
            for listener in listeners:
                listener()
            self.signal_group(signal.SIGKILL)
            self._signal_tree(signal.SIGKILL)
        return None

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM the whole group now; :meth:`wait` sends SIGKILL after ``grace_seconds``."""
        deadline = time.monotonic() + max(0.0, grace_seconds)
        if self._kill_at is None:
            self.signal_group(signal.SIGTERM)
            # The rest of the tree (children that left the group); the group's members once.
            self._signal_tree(signal.SIGTERM, except_group=self.pgid)
            self._kill_at = deadline
        else:
            self._kill_at = min(self._kill_at, deadline)

    def finish(self) -> int:
        """Wait for the end (still delivering a pending SIGKILL), reap, and drain the output."""
        while (returncode := self.wait(FINISH_POLL_SECONDS)) is None:
            pass
        # Whatever held the pipes has been killed with the tree; a process that escaped both
        # nets may hold them forever, so the readers get one short deadline between them.
        give_up = time.monotonic() + READER_JOIN_SECONDS
        for reader in self._readers:
            reader.join(timeout=max(0.0, give_up - time.monotonic()))
        self._chunks.put(None)  # what was read is still split and passed on
        self._splitter.join()
        return returncode

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self.pgid, sig)

    @property
    def _popen(self) -> subprocess.Popen[bytes] | ForkedHolder:
        if self._proc is None:
            raise RuntimeError("the process has not been started")
        return self._proc

    def when_exited(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once, from the thread that learns of it) as soon as the process
        has exited, before it is reaped; at once if it already has."""
        with self._exit_lock:
            if self._on_exit is not None:
                self._on_exit.append(callback)
                return
        callback()

    def notify_kill(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` once, just before the SIGKILL of a stop whose grace period ran out
        (while the processes still hold what they had open): a checkpoint sync notes what was
        still being written. Called from the thread that waits."""
        self._before_kill.append(listener)

    def notify_exit(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` once :meth:`wait` would see the exit (register before
        :meth:`start`): a supervisor of several processes wakes on it instead of polling."""
        self._after_exit.append(listener)

    def _watch(self) -> None:
        """Learn of the exit without reaping, so the group id cannot be reused before
        :meth:`_reap` has killed what the script left behind."""
        with contextlib.suppress(ChildProcessError):
            ended = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            if ended is not None and ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                self.killed_by = (ended.si_status, time.time())
        with self._exit_lock:
            callbacks, self._on_exit = self._on_exit or [], None  # None: later ones run at once
        for callback in callbacks:
            callback()
        self._exited.set()
        for listener in self._after_exit:
            listener()

    def _reap(self) -> int:
        if self._popen.returncode is None:
            self.signal_group(signal.SIGKILL)
        tree, self._tree = self._tree, None
        if tree is not None:
            tree.kill_all()  # the job's processes end with its script, as its container would
        return self._popen.wait()

    def _signal_tree(self, sig: signal.Signals, except_group: int | None = None) -> None:
        if self._tree is not None:
            self._tree.signal(sig, except_group=except_group)

    def _put_chunk(self, name: str, chunk: bytes) -> None:
        self._chunks.put((name, chunk))

    def _split(self) -> None:
        """Split queued chunks into lines and pass them on, until :meth:`finish` says so."""
        held = {"stdout": bytearray(), "stderr": bytearray()}
        while (item := self._next()) is not None:
            name, chunk = self._coalesce(item)
            rest = held[name]
            if not chunk:  # end of the stream: a last line without a newline
                if rest:
                    self._emit(name, [_decode(bytes(rest))])
                    rest.clear()
                continue
            cut = chunk.rfind(b"\n")
            if cut < 0:
                rest += chunk
                while len(rest) >= MAX_LINE_BYTES:
                    self._emit(name, [_decode(bytes(rest[:MAX_LINE_BYTES]))])
                    del rest[:MAX_LINE_BYTES]
                continue
            if rest:
                rest += chunk[: cut + 1]
                block = bytes(rest)
                rest.clear()
            else:
                block = chunk[: cut + 1]
            rest += chunk[cut + 1 :]
            self._emit(name, _split_lines(block))
        for name, rest in held.items():  # streams whose end never came (a leftover holds them)
            if rest:
                self._emit(name, [_decode(bytes(rest))])

    def _next(self) -> tuple[str, bytes] | None:
        return self._put_back.pop() if self._put_back else self._chunks.get()

    def _coalesce(self, item: tuple[str, bytes]) -> tuple[str, bytes]:
        """``item`` joined with the chunks of the same stream that follow within 10 ms (up to
        1 MiB): a script printing line by line is then reported in batches of many lines, for
        at most 10 ms more latency."""
        name, chunk = item
        if not chunk or self._put_back:
            return item
        parts, size = [chunk], len(chunk)
        until = time.monotonic() + COALESCE_SECONDS
        while size < PIPE_BYTES:
            try:
                following = self._chunks.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if following is None or following[0] != name or not following[1]:
                self._put_back.append(following)
                break
            parts.append(following[1])
            size += len(following[1])
        return name, b"".join(parts)

    def _emit(self, name: str, lines: list[str]) -> None:
        if name == "stderr":
            self.stderr_tail.extend(lines[-TAIL_LINES:])
        self._on_line(name, lines, time.time())


def _enlarge_pipe(fd: int) -> bool:
    """Let the script write up to 1 MiB ahead of the reader (Linux only; best effort);
    whether the pipe now holds that much."""
    setsz = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsz is None:
        return False
    try:
        return int(fcntl.fcntl(fd, setsz, PIPE_BYTES)) >= PIPE_BYTES
    except OSError:
        return False


def _split_lines(block: bytes) -> list[str]:
    """Lines of ``block`` (which ends with a newline), each decoded and without its newline;
    a line longer than :data:`MAX_LINE_BYTES` is split into pieces of that size."""
    text = block.decode("utf-8", errors="replace")
    lines = text.split("\n")
    lines.pop()  # the empty string after the final newline
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if len(block) > MAX_LINE_BYTES and any(len(line) > MAX_LINE_BYTES // 4 for line in lines):
        return [piece for line in lines for piece in _pieces(line)]
    return lines


def _pieces(line: str) -> list[str]:
    raw = line.encode("utf-8", errors="surrogatepass")
    if len(raw) <= MAX_LINE_BYTES:
        return [line]
    return [
        _decode(raw[start : start + MAX_LINE_BYTES]) for start in range(0, len(raw), MAX_LINE_BYTES)
    ]


def _decode(chunk: bytes) -> str:
    if chunk.endswith(b"\n"):
        chunk = chunk[:-1]
    if chunk.endswith(b"\r"):
        chunk = chunk[:-1]
    return chunk.decode("utf-8", errors="replace")
