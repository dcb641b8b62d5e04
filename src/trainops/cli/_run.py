"""``trainops run``: submit a spec, follow it to the end, print a summary, exit with its outcome.

Ctrl-C with an embedded server asks the job to stop and waits for it (the job cannot outlive
this command); a second Ctrl-C exits at once. With a configured server Ctrl-C only detaches.
SIGTERM and SIGHUP (a closed terminal, a CI runner's timeout) count as Ctrl-C; after SIGHUP the
output goes nowhere, since the terminal that showed it is gone. With ``--ui`` the web UI's login
link is printed once the job is submitted, and the embedded server stays up after the job (with a
fresh link) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from trainops._errors import ServerError
from trainops._settings import Settings
from trainops.cli._commands import flush_output, print_line, print_lines, print_transition
from trainops.cli._render import format_job_summary
from trainops.client import Client, JobFollower, connect, submit_spec
from trainops.spec import load_raw_spec

__all__ = ["INTERRUPTED", "run", "say", "signals_as_ctrl_c", "silence"]

INTERRUPTED = 130
_LIKE_CTRL_C = (signal.SIGTERM, signal.SIGHUP)
_RULES_WAIT_S = 30.0
_RULES_POLL_S = 0.2


def run(args: argparse.Namespace) -> int:
    spec = load_raw_spec(args.spec)
    settings = Settings.load()
    ui = bool(getattr(args, "ui", False))
    # A running server validates the spec; an embedded one is only started for a valid spec.
    with _signals_as_ctrl_c(), connect(settings, before_embedded=spec.check) as client:
        name = submit_spec(client, spec, settings)
        print(f"Submitted {name}", flush=True)
        if ui:
            print(_ui_address(client), flush=True)
        follower = JobFollower(
            client, name, print_line, print_transition, on_page=flush_output, on_lines=print_lines
        )
        description = _follow(client, follower)
        if description is not None:
            description = _rules_settled(client, description)
            if ui:  # the summary now: the server (and the UI) stays up after it
                print(format_job_summary(description), flush=True)
                _keep_serving(client)
    if description is None:
        return INTERRUPTED
    if not ui:
        print(format_job_summary(description))
    return 0 if description["TrainingJobStatus"] == "Completed" else 1


def _ui_address(client: Client) -> str:
    """Where the job's web UI is: a one-time login link of the embedded server, else the
    running server's address (its API token signs in)."""
    if client.ui_link is not None:
        return f"Web UI: {client.ui_link()} (a one-time login link, good for 10 minutes)"
    return f"Web UI: {client.url}/ (sign in with the server's API token)"


def _keep_serving(client: Client) -> None:
    """``--ui``: keep the embedded server (and its UI) up after the job, until Ctrl-C."""
    if not client.embedded:
        return  # the server the job ran on keeps serving by itself
    print(f"{_ui_address(client)}; serving until Ctrl-C", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def _rules_settled(client: Client, description: dict[str, Any]) -> dict[str, Any]:
    """The description once every rule has its final verdict (the rules service
    evaluates them once more when the job ends), or as it is after ``_RULES_WAIT_S``."""
    deadline = time.monotonic() + _RULES_WAIT_S
    try:
        while _rules_pending(description) and time.monotonic() < deadline:
            time.sleep(_RULES_POLL_S)
            description = client.describe(str(description["TrainingJobName"]))
    except KeyboardInterrupt:
        pass  # the user would rather not wait: the summary says InProgress
    return description


def _rules_pending(description: dict[str, Any]) -> bool:
    statuses = [
        *(description.get("ProfilerRuleEvaluationStatuses") or []),
        *(description.get("DebugRuleEvaluationStatuses") or []),
    ]
    return any(status.get("RuleEvaluationStatus") == "InProgress" for status in statuses)


def _follow(client: Client, follower: JobFollower) -> dict[str, Any] | None:
    """The final description, or None when the user detached or insisted on leaving."""
    cause = ""
    try:
        return follower.follow()
    except KeyboardInterrupt as exc:
        cause = f" on {exc.args[0]}" if exc.args else ""
    except BrokenPipeError:
        # Nobody reads the output any more (`trainops run job.yaml | head`): treat it as Ctrl-C,
        # following on in silence.
        silence(sys.stdout)
    name = follower.name
    if not client.embedded:
        say(f"Detached; {name} keeps running. Follow it with: trainops logs -f {name}")
        return None
    say(f"Stopping {name}{cause} (press Ctrl-C again to exit at once)...")
    try:
        _request_stop(client, name)
        return follower.follow()
    except KeyboardInterrupt:
        return None


@contextlib.contextmanager
def _signals_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt like Ctrl-C does."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in _LIKE_CTRL_C}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: For the other following commands (``trainops tune``).
signals_as_ctrl_c = _signals_as_ctrl_c


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    if signum == signal.SIGHUP:
        silence(sys.stdout)
        silence(sys.stderr)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _request_stop(client: Client, name: str) -> None:
    # Most likely the job ended in the meantime (409); following it shows how it ended.
    with contextlib.suppress(ServerError):
        client.stop(name)


def silence(stream: Any) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, stream.fileno())
    os.close(null)


def say(message: str) -> None:
    print(f"\n{message}", file=sys.stderr, flush=True)
