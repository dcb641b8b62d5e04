"""Reporting: the seam between the agent and the control plane, and its HTTP implementation.

:class:`Reporter` is what :class:`~trainops.agent.HostAgent` talks to. :class:`HttpReporter`
numbers events from 1 and appends each to ``journal.jsonl`` (one JSON event a line); the journal
is the only record of what is unsent: a sender thread reads it back by offset and posts it in
batches of up to 1 MiB, at least every 0.5 s (a heartbeat, possibly empty; every 1 s once nothing
was sent or received for 5 s). After a failure it resends from the first event above the
acknowledged sequence number, so the control plane, which stores each sequence number once, sees
every event exactly once.

Emitting never waits for the network: an event is encoded and buffered under a lock that the
sender only holds to swap buffers, never while it writes a file or posts. The buffer is written
to the journal when it reaches 1 MiB, 0.2 s after the last write, before every post, and (with
fsync) at an ``exit`` event. Memory therefore stays bounded whatever the server does; the disk
absorbs a slow or absent server up to ``journal_cap`` bytes of unsent events. Past the cap, the
script's log lines and metric points are no longer reported (they stay in ``host.log``, which is
uploaded), with a warning when that starts and a count when it ends; phases, the agent's own
lines and the exit event are always reported.

A full disk loses nothing. Events the journal cannot take (ENOSPC) stay in memory, in order, and
are written (fsynced, if an ``exit`` asked for it) once it can; meanwhile, once the journal's
events are delivered, they are posted from memory (those acknowledged are dropped and never
journaled: the store has them). A control plane whose store is full answers 507 and is asked
again, with a backoff, until it takes them. :meth:`HttpReporter.close`
gives up after its timeout only when what is left is safe in the journal and the server cannot
be reached (the next control plane reads the journal): while the server answers 507, or events
exist nowhere but in this process, it keeps trying, so that a host's end (with its own exit time)
arrives once space is freed rather than being declared lost. That is bounded where the journal
stays unwritable: ``give_up_seconds`` (the agent passes the control plane's heartbeat timeout)
past the close's own timeout, with the journal still full, the reporter gives up, says on the
agent's stderr in one line what was lost and why (the control plane quotes that output as the
lost host's failure reason), and :attr:`HttpReporter.gave_up` says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from trainops.agent.reporting._client import AgentApiError, AgentClient
from trainops.protocol import AgentEvent, Command, EventKind, event_span

__all__ = ["DEFAULT_JOURNAL_CAP", "EventJournal", "HttpReporter", "Reporter"]

MAX_BATCH_BYTES = 1024 * 1024
JOURNAL_BUFFER_BYTES = 1024 * 1024
JOURNAL_FLUSH_SECONDS = 0.2
DEFAULT_JOURNAL_CAP = 1024 * 1024 * 1024
HEARTBEAT_SECONDS = 0.5
#: After this long with nothing sent and no command received, heartbeats come at twice the
#: interval (a sleeping script's host costs the control plane half the requests); an event or a
#: command brings the interval back at once.
QUIET_AFTER_SECONDS = 5.0
MIN_POST_GAP_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 2.0
INSUFFICIENT_STORAGE = 507
UNAUTHORIZED = 401
#: Every post refused as unauthorized for this long: the control plane has revoked this host's
#: token (it declared the host lost, or the attempt or the job ended); the host is disowned.
DISOWNED_AFTER_SECONDS = 5.0


class Reporter(Protocol):
    """Where a host agent's events go and where its commands come from."""

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        """Record one event (thread-safe) and return it with its sequence number (0: dropped)."""
        ...

    def commands(self) -> list[Command]:
        """Commands received since the last call (each returned once)."""
        ...

    def close(self, timeout: float = 30.0) -> bool:
        """Deliver what is pending, waiting at most ``timeout`` s; ``True`` if all was delivered."""
        ...

    @property
    def disowned(self) -> str | None:
        """Why the control plane no longer accepts this host's reports, once it has refused
        them for good (its token was revoked); None while it accepts them."""
        ...


class EventJournal:
    """``journal.jsonl``, append only: one JSON event a line, read back by byte offset."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._reader = os.open(path, os.O_RDONLY)
        self.start = os.fstat(self._fd).st_size  # where this agent's events begin

    def write(self, data: bytes, *, durable: bool = False) -> None:
        if self._fd < 0:
            raise ValueError(f"{self.path} is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        if durable:
            os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes (a write that failed half-way)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._reader, size, offset)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            os.close(self._reader)
            self._fd = self._reader = -1  # never write to a number the OS has handed out again

    @staticmethod
    def read(path: Path) -> list[AgentEvent]:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [AgentEvent.from_json(json.loads(line)) for line in lines if line.strip()]


class HttpReporter:
    """A :class:`Reporter` that posts to the agent API; call :meth:`start` before emitting."""

    def __init__(
        self,
        client: AgentClient,
        attempt: int,
        journal_path: Path,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        min_gap: float = MIN_POST_GAP_SECONDS,
        journal_cap: int = DEFAULT_JOURNAL_CAP,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        give_up_seconds: float | None = None,
        quiet_after: float = QUIET_AFTER_SECONDS,
        disowned_after: float = DISOWNED_AFTER_SECONDS,
    ) -> None:
        self._client = client
        self._attempt = attempt
        self._journal = EventJournal(journal_path)
        self._heartbeat = heartbeat
        self._quiet_after = quiet_after
        self._last_busy = time.monotonic()  # when a post last carried events or got commands
        self._min_gap = min_gap
        self._cap = journal_cap
        self._max_batch = max_batch_bytes
        self._give_up = give_up_seconds
        self._lock = threading.Lock()  # never held while writing a file or posting
        self._write_lock = threading.Lock()  # orders journal writes
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._seq = 0
        self._acked = 0
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._last_write = time.monotonic()
        self._end = self._journal.start  # journal offset after the last event (buffered or not)
        self._written = self._journal.start  # journal offset after the last written event
        self._written_seq = 0  # the last sequence number written to the journal
        self._send_offset = self._journal.start  # where the first unacknowledged event begins
        self._dropped: dict[str, int] | None = None  # counts while past the journal cap
        self._commands: list[Command] = []
        self._closing_until: float | None = None
        self._store_full = False  # the last post was answered 507: the control plane's disk
        self._durable_due = False  # a durable write failed: the next write that works fsyncs
        self._disowned_after = disowned_after
        self._refused_since: float | None = None  # the first of the posts refused since (401)
        self._disowned: str | None = None
        self._thread = threading.Thread(target=self._run, name="agent-reporter", daemon=True)
        self.last_error: str | None = None
        self.journal_error: str | None = None
        self.gave_up = False  # closing stopped keeping events the full journal could not take

    @property
    def disowned(self) -> str | None:
        with self._lock:
            return self._disowned

    @property
    def acked_seq(self) -> int:
        with self._lock:
            return self._acked

    @property
    def buffered_bytes(self) -> int:
        """Events held in memory, not yet written to the journal (bounded by the 1 MiB buffer)."""
        with self._lock:
            return self._buffered

    @property
    def unsent_bytes(self) -> int:
        """Events in the journal (or its buffer) not acknowledged yet."""
        with self._lock:
            return self._end - self._send_offset

    def start(self) -> HttpReporter:
        self._thread.start()
        return self

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        capped = kind is EventKind.METRIC or (
            kind is EventKind.LOG and data.get("stream") != "agent"
        )
        durable = kind is EventKind.EXIT
        with self._lock:
            if capped and self._over_cap(kind, data):
                return AgentEvent(seq=0, ts=time.time(), kind=kind, data=data)
            event = self._append(kind, data)
            write = (
                durable
                or self._buffered >= JOURNAL_BUFFER_BYTES
                or time.monotonic() - self._last_write >= JOURNAL_FLUSH_SECONDS
            )
        if write:
            self._write_journal(durable=durable)
        if not self._wake.is_set():
            self._wake.set()
        return event

    def commands(self) -> list[Command]:
        with self._lock:
            taken, self._commands = self._commands, []
        return taken

    def close(self, timeout: float = 30.0) -> bool:
        self._write_journal(durable=True)
        with self._lock:
            self._closing_until = time.monotonic() + timeout
        self._closed.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout + 1.0)
        while self._thread.is_alive() and self._keeping():
            self._thread.join(1.0)
        self._client.close()
        with self._write_lock, self._lock:
            self._journal.close()
            return self._acked >= self._seq

    # Emitting (callers hold self._lock) ---------------------------------------------------

    def _append(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        event = AgentEvent(seq=self._seq + 1, ts=time.time(), kind=kind, data=data)
        self._seq += event_span(kind, data)
        line = _encode(event)
        self._buffer.append(line)
        self._buffered += len(line)
        self._end += len(line)
        return event

    def _over_cap(self, kind: EventKind, data: dict[str, Any]) -> bool:
        """Whether the script's lines and points must not be reported now (counting them)."""
        unsent = self._end - self._send_offset
        if self._dropped is None:
            if unsent < self._cap:
                return False
            self._dropped = {"log": 0, "metric": 0}
            self._warn(
                f"the control plane has not acknowledged {unsent} bytes of events (the journal"
                f" cap is {self._cap} bytes): the script's log lines and metric points are no"
                " longer reported until it catches up; host.log keeps every line"
            )
        elif unsent < self._cap // 2:
            dropped, self._dropped = self._dropped, None
            self._warn(
                f"reporting the script's output again; {dropped['log']} log line(s) and"
                f" {dropped['metric']} metric point(s) were not reported (see host.log)"
            )
            return False
        self._dropped[str(kind)] += event_span(kind, data)
        return True

    def _warn(self, message: str) -> None:
        print(f"trainops agent: {message}", file=sys.stderr, flush=True)
        self._append(EventKind.LOG, {"stream": "agent", "line": f"WARNING: {message}"})

    # Writing the journal ------------------------------------------------------------------

    def _write_journal(self, *, durable: bool = False) -> None:
        with self._write_lock:
            with self._lock:
                parts, self._buffer, self._buffered = self._buffer, [], 0
                end, last_seq = self._end, self._seq
                self._last_write = time.monotonic()
                durable = durable or self._durable_due
            if parts or durable:
                try:
                    self._journal.write(b"".join(parts), durable=durable)
                except OSError as exc:  # a full disk: keep the events until it can be written
                    self._requeue(parts, exc, durable=durable)
                    return
            with self._lock:
                self._durable_due = False
                self.journal_error = None
                if end > self._written:
                    self._written, self._written_seq = end, last_seq

    def _requeue(self, parts: list[bytes], exc: OSError, *, durable: bool) -> None:
        """Put events the journal could not take back in front of the buffer, after cutting
        off whatever part of them reached the file, so the journal never holds a torn line."""
        with self._lock:
            if self.journal_error is None:
                _say(f"cannot write the journal {self._journal.path} ({exc}); keeping the events")
            self.journal_error = str(exc)
            self._durable_due = self._durable_due or durable
            self._journal.truncate(self._written)
            self._buffer[:0] = parts
            self._buffered += sum(len(part) for part in parts)

    # Sending ------------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.0
        while True:
            started = time.monotonic()
            try:
                self._post_once()
                backoff = 0.0
                self._set_store_full(False)
                self._set_refused(None)
            except Exception as exc:  # the sender must outlive any one failure
                self.last_error = str(exc) if isinstance(exc, AgentApiError) else repr(exc)
                full = isinstance(exc, AgentApiError) and exc.status == INSUFFICIENT_STORAGE
                self._set_store_full(full)
                refused = isinstance(exc, AgentApiError) and exc.status == UNAUTHORIZED
                self._set_refused(exc if refused else None)
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF_SECONDS)
                self._client.refresh_server()
            if self._finished():
                return
            self._pause(started, backoff)

    def _post_once(self) -> None:
        self._write_journal()
        with self._lock:
            offset, written, written_seq = self._send_offset, self._written, self._written_seq
            unjournaled = offset >= written and self.journal_error is not None
        if unjournaled:
            self._post_unjournaled()
            return
        batch = self._read_batch(offset, written)
        reply = self._client.post_raw_events(self._attempt, batch.replace(b"\n", b",")[:-1])
        with self._lock:
            self._acked = max(self._acked, reply.acked_seq)
            self._commands.extend(reply.commands)
            acked = self._acked
        if batch or reply.commands:
            self._last_busy = time.monotonic()
        if acked >= written_seq:  # the usual case: all that was sent is acknowledged
            offset = written
        elif batch and acked < _seq_of(batch) - 1:  # the server knows less: start over
            offset = self._journal.start
        offset = self._first_unacked(offset, acked)
        with self._lock:
            self._send_offset = offset

    def _post_unjournaled(self) -> None:
        """The journal cannot be written (a full disk) and all it holds is delivered: post the
        oldest events held in memory. Those acknowledged are dropped, never to be journaled
        (the store has them; a control plane reading the journal skips what it has)."""
        with self._write_lock, self._lock:
            batch: list[bytes] = []
            size = 0
            for part in self._buffer:
                if batch and size + len(part) > self._max_batch:
                    break
                batch.append(part)
                size += len(part)
        body = b"".join(batch)
        reply = self._client.post_raw_events(self._attempt, body.replace(b"\n", b",")[:-1])
        with self._write_lock, self._lock:
            self._acked = max(self._acked, reply.acked_seq)
            self._commands.extend(reply.commands)
            while self._buffer and _seq_of(self._buffer[0]) <= self._acked:
                dropped = len(self._buffer.pop(0))
                self._buffered -= dropped
                self._end -= dropped

    def _read_batch(self, offset: int, written: int) -> bytes:
        """Whole journal lines from ``offset``: up to the batch size, but at least one line."""
        if offset >= written:
            return b""
        data = self._journal.pread(min(written - offset, self._max_batch), offset)
        cut = data.rfind(b"\n")
        while cut < 0 and offset + len(data) < written:  # one event larger than a batch
            more = min(written - offset - len(data), self._max_batch)
            data += self._journal.pread(more, offset + len(data))
            cut = data.rfind(b"\n")
        return data[: cut + 1]

    def _first_unacked(self, offset: int, acked: int) -> int:
        """The offset of the first event after ``offset`` whose sequence number is above
        ``acked`` (the end of what is written if there is none)."""
        with self._lock:
            written = self._written
        while offset < written:
            data = self._read_batch(offset, written)
            if not data:
                break
            start = 0
            while start < len(data):
                if _seq_of(data, start) > acked:
                    return offset + start
                start = data.index(b"\n", start) + 1
            offset += len(data)
        return offset

    def _set_refused(self, exc: Exception | None) -> None:
        """Count how long every post has been refused as unauthorized (``exc``), and call the
        host disowned past :attr:`_disowned_after` (for good: a revoked token stays revoked)."""
        now = time.monotonic()
        with self._lock:
            if exc is None or self._disowned is not None:
                self._refused_since = None if exc is None else self._refused_since
                return
            if self._refused_since is None:
                self._refused_since = now
            if now - self._refused_since < self._disowned_after:
                return
            self._disowned = (
                f"the control plane has refused this host's reports for"
                f" {now - self._refused_since:.0f} s ({exc}): its token was revoked, as when"
                " the host is declared lost or its attempt or job has ended"
            )
        _say(f"disowned: {self._disowned}")

    def _set_store_full(self, full: bool) -> None:
        with self._lock:
            if full and not self._store_full:
                _say(
                    "the control plane's store is full (HTTP 507): keeping every event until it"
                    " takes them"
                )
            self._store_full = full

    def _finished(self) -> bool:
        with self._lock:
            if self._closing_until is None:
                return False
            if self._disowned is not None:
                return True  # nothing more is ever taken: what is left stays in the journal
            if self._acked >= self._seq:
                return True
            return time.monotonic() >= self._closing_until and not self._must_keep()

    def _keeping(self) -> bool:
        with self._lock:
            return self._must_keep()

    def _must_keep(self) -> bool:
        """Whether closing must go on past its timeout (callers hold ``self._lock``): the server
        answers that its disk is full, or events are in no journal yet (only in memory); never
        once it gave up (:meth:`_give_up_now`) or the host is disowned."""
        if self._disowned is not None:
            return False
        keep = self._store_full or self._written < self._end
        if keep and not self.gave_up and self._give_up_now():
            self.gave_up = True
            _say(self._lost())
        return keep and not self.gave_up

    def _give_up_now(self) -> bool:
        """Whether the journal has stayed unwritable ``give_up_seconds`` past the close's
        timeout (callers hold ``self._lock``)."""
        if self._give_up is None or self._closing_until is None or self.journal_error is None:
            return False
        return time.monotonic() >= self._closing_until + self._give_up

    def _lost(self) -> str:
        """The one line that says what giving up loses, and why (callers hold ``self._lock``)."""
        unsent = self._seq - self._acked
        where = (
            "the control plane's store is full (HTTP 507)"
            if self._store_full
            else f"the control plane did not take them ({self.last_error or 'no answer'})"
        )
        return (
            f"giving up after {self._give_up:g} s more: {unsent} events (the host's end among "
            f"them) are lost: the journal {self._journal.path} cannot be written "
            f"({self.journal_error}) and {where}; free space on the journal's disk"
        )

    def _pause(self, started: float, backoff: float) -> None:
        """Sleep until the next post: the backoff after a failure, else until events arrive
        (but not sooner than ``min_gap`` after the last post) or the heartbeat is due."""
        if backoff:
            self._sleep_unless_closing(backoff)
            return
        with self._lock:  # (while the journal cannot be written, retry at the heartbeat's pace)
            more = self._send_offset < self._end and self.journal_error is None
            closing = self._closing_until is not None
        if more and (closing or self._end - self._send_offset >= self._max_batch):
            return
        self._wake.wait(max(0.0, self._interval(started) - (time.monotonic() - started)))
        self._wake.clear()
        # Coalesce bursts of lines into fewer posts, except when closing.
        self._closed.wait(max(0.0, self._min_gap - (time.monotonic() - started)))

    def _interval(self, now: float) -> float:
        """The heartbeat's interval: doubled once nothing was sent or received for a while."""
        quiet = now - self._last_busy >= self._quiet_after
        return self._heartbeat * 2 if quiet else self._heartbeat

    def _sleep_unless_closing(self, seconds: float) -> None:
        with self._lock:
            until = None if self._must_keep() else self._closing_until
        if until is not None:
            seconds = min(seconds, max(0.0, until - time.monotonic()))
        time.sleep(seconds)


def _say(message: str) -> None:
    """One line on the agent's stderr (its ``agent.log``), never an event: it may be what cannot
    be written or delivered."""
    with contextlib.suppress(OSError, ValueError):
        print(f"trainops agent: {message}", file=sys.stderr, flush=True)


def _seq_of(data: bytes, start: int = 0) -> int:
    """The sequence number of the journal line at ``start`` in ``data`` (lines are written by
    :func:`_encode`, which puts ``seq`` first)."""
    prefix = b'{"seq":'
    if data.startswith(prefix, start):
        end = data.find(b",", start + len(prefix), start + 40)
        if end > 0:
            return int(data[start + len(prefix) : end])
    line_end = data.find(b"\n", start)
    return int(json.loads(data[start : line_end if line_end >= 0 else None])["seq"])


def _encode(event: AgentEvent) -> bytes:
    """``event`` as one journal line: JSON (``seq`` first), UTF-8, ending with a newline."""
    text = json.dumps(event.to_json(), separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8", errors="replace")
