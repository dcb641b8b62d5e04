"""The process-group supervisor: a host's ranks started together and ended together.

Every process a launcher asked for is started in its own session with its output captured
(:class:`ScriptProcess`) and tagged with its rank. The group fails fast: the first process that
exits non-zero is the group's failure, and every other process is sent SIGTERM at once (SIGKILL
after :data:`FAIL_FAST_GRACE_SECONDS`), so no survivor hangs in a collective waiting for a rank
that is gone. A stop reaches every process the same way.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainops.agent.launchers import RankProcess
from trainops.agent.reporting._hostlog import LineSink
from trainops.agent.supervision._hostns import unwrap
from trainops.agent.supervision._process import ScriptProcess, Spawn
from trainops.agent.supervision._rank_report import (
    TAG_STYLES,
    LauncherReport,
    RankFailure,
    report_for,
)

__all__ = ["FAIL_FAST_GRACE_SECONDS", "FailedRank", "GroupMember", "ProcessGroup"]

FAIL_FAST_GRACE_SECONDS = 5.0
POLL_SECONDS = 0.05
RELEASE_CHECK_SECONDS = 1.0
MAX_HELD_CHARS = 1 << 20  # a rank's unfinished line held back from interleaved pieces

RANK_TAIL_LINES = 20

RankSink = Callable[[int | None, str, list[str], float], None]


@dataclass
class RankTails:
    """What a launcher's ranks wrote to stderr last, and what the launcher said of them."""

    report: LauncherReport | None = None
    stderr: dict[int, deque[str]] = field(default_factory=dict)

    def take(self, rank: int | None, stream: str, lines: list[str]) -> None:
        if rank is not None and stream == "stderr":
            self.stderr.setdefault(rank, deque(maxlen=RANK_TAIL_LINES)).extend(lines)
        elif rank is None and self.report is not None:
            for line in lines:
                self.report.take(line)


@dataclass(frozen=True, slots=True)
class FailedRank:
    """The rank a launcher says failed first: its number, exit code where the launcher gave
    it, and its last stderr lines."""

    rank: int
    exit_code: int | None
    stderr_tail: list[str]


@dataclass
class GroupMember:
    """One started process of the group and how it ended."""

    spec: RankProcess
    process: ScriptProcess
    returncode: int | None = None
    released: bool = False  # an auxiliary process the group stopped because its work was done
    tails: RankTails = field(default_factory=RankTails)  # a launcher's ranks (output_tags)

    @property
    def label(self) -> str:
        return "the launcher" if self.spec.rank is None else f"rank {self.spec.rank}"


class ProcessGroup:
    """The processes of one host, supervised as one."""

    def __init__(
        self,
        processes: Sequence[RankProcess],
        *,
        cwd: Path,
        on_line: RankSink,
        marker: Callable[[], str],
        fail_fast_grace: float = FAIL_FAST_GRACE_SECONDS,
        spawn: Spawn | None = None,
    ) -> None:
        """``spawn``: how the one process of ``processes`` is started (the host's namespace
        holder starts it), instead of a Popen of its own."""
        if not processes:
            raise ValueError("a process group needs at least one process")
        if spawn is not None and len(processes) > 1:
            raise ValueError("a spawn starts one process, not a group's")
        # Each process gets a marker of its own: the first to end sweeps up what it left
        # behind, and must not take its siblings with it.
        tails = [RankTails(report_for(p.output_tags) if p.output_tags else None) for p in processes]
        self.members = [
            GroupMember(
                spec,
                ScriptProcess(
                    spec.argv,
                    cwd=cwd,
                    env=spec.env,
                    on_line=_tagged(on_line, spec, tail),
                    marker=marker(),
                    spawn=spawn,
                ),
                tails=tail,
            )
            for spec, tail in zip(processes, tails, strict=True)
        ]
        self._fail_fast_grace = fail_fast_grace
        self._changed = threading.Event()  # a process has exited: look again at once
        for member in self.members:
            member.process.notify_exit(self._changed.set)
        self.first_failure: GroupMember | None = None
        self.failed_at: float | None = None  # when the first failure was seen (Unix time)
        self._next_release_check = 0.0

    @property
    def argv(self) -> list[str]:
        return list(self.members[0].spec.argv)

    def start(self) -> None:
        """Start every process; if one cannot be started, the ones already started are ended
        and the ``OSError`` is raised."""
        started: list[ScriptProcess] = []
        try:
            for member in self.members:
                member.process.start()
                started.append(member.process)
        except OSError:
            for process in started:
                process.terminate(0)
                process.finish()
            raise

    def wait(self, timeout: float) -> int | None:
        """The group's exit code once every process has ended, else ``None`` after ``timeout``.

        Also ends the group at the first failure and delivers pending SIGKILLs.
        """
        until = time.monotonic() + timeout
        while True:
            self._changed.clear()
            for member in self.members:
                if member.returncode is None:
                    member.returncode = member.process.wait(0)
                    failed = member.returncode not in (None, 0) and not member.released
                    if failed and self.first_failure is None:
                        self._fail_fast(member)
            if all(m.returncode is not None for m in self.members if not m.spec.auxiliary):
                self._release_auxiliaries()
            if all(m.returncode is not None for m in self.members):
                return self._exit_code()
            if time.monotonic() >= until:
                return None
            # Woken by an exit at once; the period bounds how late a pending SIGKILL goes out.
            self._changed.wait(min(POLL_SECONDS, max(0.0, until - time.monotonic())))

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM every running process now, SIGKILL after ``grace_seconds``."""
        for member in self.members:
            if member.returncode is None:
                member.process.terminate(grace_seconds)

    def notify_kill(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` just before a process of the group is sent a stop's SIGKILL
        (once for each process killed so)."""
        for member in self.members:
            member.process.notify_kill(listener)

    def finish(self) -> int:
        """Wait for every process to end (delivering pending SIGKILLs) and drain all output."""
        while (code := self.wait(POLL_SECONDS * 4)) is None:
            pass
        for member in self.members:
            member.process.finish()
        return code

    def pids(self) -> list[int]:
        """The pid of every process of the group."""
        return [member.process.pid for member in self.members]

    def capture_threads(self) -> list[int]:
        """The output readers and exit watchers of every process (see ``ScriptProcess``)."""
        return [tid for member in self.members for tid in member.process.capture_threads()]

    def notify_death(self, listener: Callable[[int, float], None]) -> None:
        """Call ``listener(signal, when)`` as soon as a process of the group is seen to have
        died of a signal that the group did not send it (the out-of-memory killer, a crash, a
        kill from outside; register before :meth:`start`); from the thread that watches that
        process."""
        for member in self.members:
            process = member.process

            def heard(process: ScriptProcess = process) -> None:
                if process.killed_by is not None and not process.stopping:
                    listener(*process.killed_by)

            process.notify_exit(heard)

    def when_exited(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, as soon as every process of the group has exited."""
        left = [len(self.members)]
        lock = threading.Lock()

        def one_exited() -> None:
            with lock:
                left[0] -= 1
                done = left[0] == 0
            if done:
                callback()

        for member in self.members:
            member.process.when_exited(one_exited)

    def stderr_tail(self) -> list[str]:
        """The last stderr lines of the process that failed first (else of the first one)."""
        member = self.first_failure or self.members[0]
        return list(member.process.stderr_tail)

    def failed_rank(self) -> FailedRank | None:
        """The rank a launcher (torchrun, mpirun) says failed first (see ``_rank_report``);
        ``None`` where the group did not fail that way."""
        member = self.first_failure
        report = None if member is None else member.tails.report
        failure: RankFailure | None = None if report is None else report.first_failure()
        if member is None or failure is None:
            return None
        tail = list(member.tails.stderr.get(failure.rank, ()))
        return FailedRank(failure.rank, failure.exit_code, tail)

    def rank_exits(self) -> list[dict[str, int | None]]:
        """How each rank of the host ended, ``[{"rank": r, "exit_code": c}]``: the group's own
        ranks, and the ranks a launcher started (``rank_count``), with the exit code it
        reported (0 where it succeeded; ``None`` where it did not say)."""
        exits: list[dict[str, int | None]] = []
        for member in self.members:
            spec = member.spec
            if spec.rank is not None:
                exits.append({"rank": spec.rank, "exit_code": member.returncode})
                continue
            report = member.tails.report
            codes = {} if report is None else report.exit_codes()
            for rank in range(spec.rank_base, spec.rank_base + spec.rank_count):
                code = 0 if member.returncode == 0 else codes.get(rank)
                exits.append({"rank": rank, "exit_code": code})
        return exits

    def failed_argv(self) -> list[str]:
        """The command of the process that failed first, as its launcher gave it."""
        member = self.first_failure or self.members[0]
        return unwrap(member.spec.argv)

    def _release_auxiliaries(self) -> None:
        """The script is done: stop its helpers, each once its ``release_after`` is down."""
        now = time.monotonic()
        if now < self._next_release_check:
            return
        self._next_release_check = now + RELEASE_CHECK_SECONDS
        for member in self.members:
            if member.returncode is not None or member.released:
                continue
            target = member.spec.release_after
            if target is not None and self.first_failure is None and _listening(*target):
                continue
            member.released = True
            member.process.terminate(self._fail_fast_grace)

    def _fail_fast(self, member: GroupMember) -> None:
        self.first_failure = member
        self.failed_at = time.time()  # woken by the exit itself: the failure's own time
        for other in self.members:
            if other is not member and other.returncode is None:
                other.process.terminate(self._fail_fast_grace)

    def _exit_code(self) -> int:
        if self.first_failure is not None:
            assert self.first_failure.returncode is not None
            return self.first_failure.returncode
        return 0


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _tagged(sink: RankSink, spec: RankProcess, tails: RankTails) -> LineSink:
    if spec.output_tags is None:

        def on_line(stream: str, lines: list[str], ts: float) -> None:
            sink(spec.rank, stream, lines, ts)

        return on_line

    parser = TagParser(
        TAG_STYLES.lookup(spec.output_tags).pattern, spec.rank_base, spec.rank_count or None
    )

    def on_tagged_line(stream: str, lines: list[str], ts: float) -> None:
        for rank, tagged_stream, run in parser.feed(lines, stream):
            tails.take(rank, tagged_stream, run)
            sink(rank, tagged_stream, run, ts)

    return on_tagged_line


Run = tuple[int | None, str, list[str]]


class TagParser:
    """Turns a launcher's tagged output back into each rank's own lines.

    A launcher tags every piece of output a rank writes, and pieces of different ranks can
    share one line: mpirun prints ``[1,0]<stdout>:rank 0 …[1,1]<stdout>:rank 1 …`` and then
    ``[1,0]<stdout>:`` when rank 0's newline came in a write of its own. The last piece of a
    line is the one its newline belongs to; the pieces before it are kept per rank and stream
    until that rank's newline comes. Where the launcher starts ``count`` ranks, a tag of a
    rank beyond them is text (a rank may print anything after its own tag).
    """

    def __init__(self, tag: re.Pattern[str], base: int, count: int | None = None) -> None:
        self._tag = tag
        self._base = base
        self._count = count
        self._pending: dict[tuple[int | None, str], str] = {}

    def feed(self, lines: list[str], stream: str) -> list[Run]:
        runs: list[Run] = []
        for line in lines:
            pieces = self._pieces(line, stream)
            for key, text in pieces[:-1]:
                held = self._pending.get(key, "") + text
                if len(held) >= MAX_HELD_CHARS:  # a rank that never ends its line: pass it on
                    runs.append((key[0], key[1], [held]))
                    held = ""
                self._pending[key] = held
            key, text = pieces[-1]
            whole = self._pending.pop(key, "") + text
            if runs and runs[-1][:2] == key:
                runs[-1][2].append(whole)
            else:
                runs.append((key[0], key[1], [whole]))
        return runs

    def _pieces(self, line: str, stream: str) -> list[tuple[tuple[int | None, str], str]]:
        """``((rank, stream), text)`` of each tagged piece of ``line``; text before the first
        tag (the launcher's own output) has no rank."""
        found = [
            match
            for match in self._tag.finditer(line)
            if self._count is None or int(match.group("rank")) < self._count
        ]
        pieces: list[tuple[tuple[int | None, str], str]] = []
        if not found or found[0].start() > 0:
            first_end = found[0].start() if found else len(line)
            pieces.append(((None, stream), line[:first_end]))
        for n, match in enumerate(found):
            end = found[n + 1].start() if n + 1 < len(found) else len(line)
            where = match.group("stream") or stream
            pieces.append(((self._base + int(match.group("rank")), where), line[match.end() : end]))
        return pieces
