"""``trainops run``: submit a spec, follow it to the end, print a summary, exit with its outcome.

Ctrl-C with an embedded server asks the job to stop and waits for it (the job cannot outlive
this command); a second Ctrl-C exits at once. With a configured server Ctrl-C only detaches.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from trainops._errors import ServerError
from trainops._settings import Settings
from trainops.cli._commands import print_line, print_transition
from trainops.cli._render import format_job_summary
from trainops.client import Client, JobFollower, connect, submit_job
from trainops.spec import load_spec

__all__ = ["INTERRUPTED", "run"]

INTERRUPTED = 130


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    settings = Settings.load()
    with connect(settings) as client:
        name = submit_job(client, spec, settings, base_dir=Path(args.spec).resolve().parent)
        print(f"Submitted {name}", flush=True)
        follower = JobFollower(client, name, print_line, print_transition)
        description = _follow(client, follower)
    if description is None:
        return INTERRUPTED
    print(format_job_summary(description))
    return 0 if description["TrainingJobStatus"] == "Completed" else 1


def _follow(client: Client, follower: JobFollower) -> dict[str, Any] | None:
    """The final description, or None when the user detached or insisted on leaving."""
    try:
        return follower.follow()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # Nobody reads the output any more (`trainops run job.yaml | head`): treat it as Ctrl-C,
        # following on in silence.
        _silence_stdout()
    name = follower.name
    if not client.embedded:
        _say(f"Detached; {name} keeps running. Follow it with: trainops logs -f {name}")
        return None
    _say(f"Stopping {name} (press Ctrl-C again to exit at once)...")
    try:
        _request_stop(client, name)
        return follower.follow()
    except KeyboardInterrupt:
        return None


def _request_stop(client: Client, name: str) -> None:
    # Most likely the job ended in the meantime (409); following it shows how it ended.
    with contextlib.suppress(ServerError):
        client.stop(name)


def _silence_stdout() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


def _say(message: str) -> None:
    print(f"\n{message}", file=sys.stderr, flush=True)
