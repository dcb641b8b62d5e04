"""How a host's outcome is explained: ``output/failure`` or a toolkit-style error excerpt.

A script may write its own reason to ``output/failure`` (its first 1024 characters become the
failure reason). Otherwise the reason reads like the toolkit's ``ExecuteUserScriptError``, with
the final exception line(s) of the last Python traceback in the stderr tail, or the last
non-empty stderr lines when there is no traceback. The ``[rank3]: `` that torch.distributed puts
before every line of a rank's uncaught traceback (``init_process_group`` installs that hook) is
read through: the excerpt is the exception itself.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "MAX_FAILURE_REASON",
    "called_process_error",
    "exit_failure_reason",
    "read_failure_file",
    "stderr_excerpt",
]

MAX_FAILURE_REASON = 1024
_FAILURE_READ_BYTES = 64 * 1024  # what is read of output/failure (white space may lead)
TRACEBACK_HEAD = "Traceback (most recent call last):"
EXCERPT_LINES = 10
EXCERPT_CHARS = 700
_TORCH_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")


def called_process_error(
    kind: str, exit_code: int | str, message: str, command: Sequence[str]
) -> str:
    """The toolkit's ``_CalledProcessError`` text, e.g. ``ExecuteUserScriptError:\\nExitCode 1...``."""
    return (
        f'{kind}:\nExitCode {exit_code}\nErrorMessage "{message}"\nCommand "{" ".join(command)}"'
    ).strip()


def read_failure_file(path: Path) -> str | None:
    """The first 1024 characters of ``output/failure``, or ``None`` when it is missing or empty.

    The script writes that file: only its first :data:`_FAILURE_READ_BYTES` are read."""
    try:
        with path.open("rb") as handle:
            text = handle.read(_FAILURE_READ_BYTES).decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None
    text = text.strip()
    return text[:MAX_FAILURE_REASON] if text else None


def exit_failure_reason(returncode: int, command: Sequence[str], stderr_tail: Sequence[str]) -> str:
    """Why a script that exited with ``returncode`` (negative: killed by a signal) failed."""
    excerpt = stderr_excerpt(stderr_tail)
    if returncode < 0:
        killed = f"killed by signal {_signal_name(-returncode)}"
        excerpt = f"{killed}\n{excerpt}" if excerpt else killed
    reason = called_process_error("ExecuteUserScriptError", returncode, excerpt, command)
    return reason[:MAX_FAILURE_REASON]


def stderr_excerpt(lines: Sequence[str]) -> str:
    """The final exception of the last traceback, or the last non-empty lines."""
    lines = [_TORCH_RANK_PREFIX.sub("", line, count=1) for line in lines]
    start = _last_traceback(lines)
    if start is not None:
        found = _exception_lines(lines[start + 1 :])
        if found:
            return _clip(found)
    tail = [line for line in lines if line.strip()][-3:]
    return _clip(tail)


def _last_traceback(lines: Sequence[str]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].strip() == TRACEBACK_HEAD:
            return index
    return None


def _exception_lines(after: Sequence[str]) -> list[str]:
    """Skip the indented frame lines, then take the exception text up to a blank line."""
    index = 0
    while index < len(after) and after[index][:1] in (" ", "\t"):
        index += 1
    found: list[str] = []
    for line in after[index:]:
        if not line.strip() or len(found) == EXCERPT_LINES:
            break
        found.append(line.rstrip())
    return found


def _clip(lines: list[str]) -> str:
    text = "\n".join(line.rstrip() for line in lines)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
