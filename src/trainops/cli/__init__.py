"""The ``trainops`` command: parse arguments, run one command, turn errors into messages.

Every :class:`~trainops.TrainopsError` is printed as ``trainops: error: <message>`` with exit
code 2, never as a traceback. Command modules (and with them httpx, the server, tqdm) are
imported only once a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable, Sequence

from trainops._errors import TrainopsError
from trainops._registry import Registry
from trainops.cli._parser import build_parser

__all__ = ["entry", "main"]

ERROR_EXIT = 2
INTERRUPTED = 130
FULL_BELOW_BYTES = 1 << 20
#: Each command's handler, imported only when the command runs.
HANDLERS: Registry[Callable[[argparse.Namespace], int]] = Registry("command")
HANDLERS.register_lazy("run", "trainops.cli._run:run")
HANDLERS.register_lazy("submit", "trainops.cli._commands:submit")
HANDLERS.register_lazy("jobs", "trainops.cli._commands:jobs")
HANDLERS.register_lazy("describe", "trainops.cli._commands:describe")
HANDLERS.register_lazy("logs", "trainops.cli._commands:logs")
HANDLERS.register_lazy("metrics", "trainops.cli._commands:metrics")
HANDLERS.register_lazy("stop", "trainops.cli._commands:stop")
HANDLERS.register_lazy("chaos", "trainops.cli._commands:chaos")
HANDLERS.register_lazy("report", "trainops.cli._report:report")
HANDLERS.register_lazy("cost", "trainops.cli._cost:cost")
HANDLERS.register_lazy("cluster", "trainops.cli._commands:cluster")
HANDLERS.register_lazy("study", "trainops.cli._study:study")
HANDLERS.register_lazy("server", "trainops.cli._commands:server")
HANDLERS.register_lazy("ui", "trainops.cli._commands:ui")
HANDLERS.register_lazy("pack", "trainops.cli._pack:pack")
HANDLERS.register_lazy("tune", "trainops.cli._tune:tune")
HANDLERS.register_lazy("tuning", "trainops.cli._tune:tuning")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trainops`` with ``argv`` (default: the process arguments); returns the exit code."""
    args = build_parser().parse_args(argv)
    _tolerate_narrow_terminals()
    handler = HANDLERS.lookup(args.handler)
    try:
        return handler(args)
    except TrainopsError as exc:
        print(f"trainops: error: {exc}", file=sys.stderr)
        return ERROR_EXIT
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`trainops jobs | head`): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if _out_of_space(exc):
            print(f"trainops: error: {_no_space_message(exc)}", file=sys.stderr)
            return ERROR_EXIT
        if not _is_store_error(exc):
            raise
        # The embedded server's store could not be opened or written: a full disk, mostly.
        print(
            f"trainops: error: the metadata store cannot be used: {exc}{_full_disk_hint()}",
            file=sys.stderr,
        )
        return ERROR_EXIT


def entry() -> None:
    """The console script: run :func:`main`, flush, and exit without interpreter teardown.

    By the time ``main`` returns every command has closed what it opened (connections, the
    embedded server); tearing down the imported modules (pydantic's schema objects, mostly) only
    adds tens of milliseconds to every command, which the launch-overhead budget cannot spare.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = code or 0
    os._exit(code)


def _is_store_error(exc: Exception) -> bool:
    """An SQLite OperationalError; sqlite3 is not imported for it (only a store raises one)."""
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(exc, sqlite3.OperationalError)


def _out_of_space(exc: BaseException) -> bool:
    from trainops._disk import is_out_of_space

    return is_out_of_space(exc)


def _no_space_message(exc: BaseException) -> str:
    """Which disk is full (the written file's, else the home's or the temporary folder's)."""
    import tempfile
    from pathlib import Path

    from trainops._disk import full_disk_message
    from trainops._settings import Settings

    candidates = [Path(tempfile.gettempdir())]
    with contextlib.suppress(TrainopsError):
        candidates.insert(0, Settings.load().home)
    return full_disk_message(exc, candidates)


def _full_disk_hint() -> str:
    import shutil

    from trainops._settings import Settings

    try:
        home = Settings.load().home
        full = shutil.disk_usage(home).free < FULL_BELOW_BYTES
    except (TrainopsError, OSError):
        return ""
    return f" (the disk under {home} is full; free some space there)" if full else ""


def _tolerate_narrow_terminals() -> None:
    """Print non-ASCII signs (the summary's almost-equal and times) as '?' on non-UTF-8 output."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
