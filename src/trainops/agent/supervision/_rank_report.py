"""What a launcher that starts a host's ranks itself (torchrun, mpirun) says about them.

The launcher's own lines (its output without a rank tag) are read as they come. torchrun ends a
failed run with a summary of every rank that ended non-zero (``rank : 3 (local_rank: 1)``,
``exitcode : 1 (pid: 4242)``), ranks it ended itself among them: once a rank has failed it sends
the others SIGTERM, and logs ``Sending process 4241 closing signal SIGTERM`` for each. Its own
"Root Cause" is the failure with the smallest timestamp, in whole seconds, and picks a rank it
ended itself whenever the two end in the same second. The first failure here is therefore the
one torchrun did not end itself (the earliest by its time where several did so). mpirun names
the rank that failed first in its own message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from trainops._registry import Registry

__all__ = [
    "TAG_STYLES",
    "LauncherReport",
    "MpirunReport",
    "RankFailure",
    "TagStyle",
    "TorchrunReport",
    "report_for",
]

MAX_FAILURES = 65536  # ranks named in one summary (bounds what a garbled output can cost)


@dataclass(frozen=True, slots=True)
class RankFailure:
    """One rank the launcher reports as ended non-zero; ``exit_code`` negative: a signal."""

    rank: int
    exit_code: int | None = None
    pid: int | None = None
    time: str = ""
    root: bool = False  # the launcher's own "first observed failure"


class LauncherReport(Protocol):
    """Reads the launcher's own (untagged) lines and says what became of its ranks."""

    def take(self, line: str) -> None: ...

    def first_failure(self) -> RankFailure | None: ...

    def exit_codes(self) -> dict[int, int]: ...


_RANK = re.compile(r"^\s*rank\s*:\s*(\d{1,9})\s*\(local_rank:\s*\d{1,9}\)")
_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d{1,9})\s*\(pid:\s*(\d{1,9})\)")
_TIME = re.compile(r"^\s*time\s*:\s*(\S{1,64})")
_CLOSING = re.compile(r"Sending process (\d{1,9}) closing signal SIG[A-Z]+")
_ROOT = "Root Cause (first observed failure):"


@dataclass
class TorchrunReport:
    """torchrun's failure summary and the ranks it ended itself."""

    failures: dict[int, RankFailure] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)  # pids torchrun sent a closing signal
    _time: str = ""
    _rank: int | None = None
    _in_root: bool = False

    def take(self, line: str) -> None:
        if match := _CLOSING.search(line):
            if len(self.closed) < MAX_FAILURES:
                self.closed.add(int(match.group(1)))
        elif line.strip() == _ROOT:
            self._in_root = True
        elif match := _TIME.match(line):
            self._time, self._rank = match.group(1), None
        elif match := _RANK.match(line):
            self._rank = int(match.group(1))
        elif (match := _EXIT.match(line)) and self._rank is not None:
            if len(self.failures) < MAX_FAILURES:
                code, pid = int(match.group(1)), int(match.group(2))
                failure = RankFailure(self._rank, code, pid, self._time, self._in_root)
                self.failures[self._rank] = failure
            self._rank = None

    def first_failure(self) -> RankFailure | None:
        """The failure torchrun did not cause itself; by time, then torchrun's own root cause,
        then the lowest rank where several qualify."""
        failures = list(self.failures.values())
        own = [f for f in failures if f.pid not in self.closed] or failures
        if not own:
            return None
        return min(own, key=lambda f: (f.time, not f.root, f.rank))

    def exit_codes(self) -> dict[int, int]:
        return {f.rank: f.exit_code for f in self.failures.values() if f.exit_code is not None}


# "MPI_ABORT was invoked on rank 3 …", "Process name: [[4415,1],3]",
# "mpirun noticed that process rank 3 with PID …"
_MPI_FAILED = re.compile(
    r"MPI_ABORT was invoked on rank (\d{1,9})|Process name: \[\[\d+,\d+\],(\d{1,9})\]"
    r"|process rank (\d{1,9}) with PID"
)


@dataclass
class MpirunReport:
    """The rank mpirun's own message names first."""

    failed: int | None = None

    def take(self, line: str) -> None:
        if self.failed is None and (match := _MPI_FAILED.search(line)):
            self.failed = int(next(g for g in match.groups() if g is not None))

    def first_failure(self) -> RankFailure | None:
        return None if self.failed is None else RankFailure(self.failed)

    def exit_codes(self) -> dict[int, int]:
        return {}


@dataclass(frozen=True, slots=True)
class TagStyle:
    """How a launcher tags its ranks' lines (``RankProcess.output_tags``): the tag at a line's
    start (groups ``rank``, the local rank, and ``stream``, empty when not said) and the reader
    of the launcher's own lines."""

    pattern: re.Pattern[str]
    report: Callable[[], LauncherReport]


#: ``output_tags`` -> its style.
TAG_STYLES: Registry[TagStyle] = Registry("rank output tag style", error=ValueError)
# torchrun's --tee header: its role ("default": the launcher passes no --role) and the local
# rank. Only that form: torch's own "[rank3]: " before a rank's traceback (the excepthook of
# init_process_group) is the rank's text, not a tag.
TAG_STYLES.register(
    "torchrun", TagStyle(re.compile(r"\[default(?P<rank>\d{1,9})\]:(?P<stream>)"), TorchrunReport)
)
TAG_STYLES.register(
    "mpirun",
    TagStyle(re.compile(r"\[\d+,(?P<rank>\d{1,9})\]<(?P<stream>stdout|stderr)>:"), MpirunReport),
)


def report_for(output_tags: str) -> LauncherReport:
    """The report reader of a launcher whose ranks' output is tagged ``output_tags``."""
    return TAG_STYLES.lookup(output_tags).report()
