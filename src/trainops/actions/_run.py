"""Running a finding's actions: stop the job, POST to a webhook, or run a local command.

Each action is bounded by its ``timeout_seconds`` and its failure is a result, never an
exception: one broken webhook does not keep the job from being stopped. A command runs
without a shell (its ``argv`` as given), with the finding as JSON on standard input and
``TRAINOPS_JOB``, ``TRAINOPS_RULE`` and ``TRAINOPS_RULE_STATUS`` in its environment; it is
killed at the timeout, and only the tail of its output is kept.
"""

from __future__ import annotations

import http.client
import os
import subprocess
from collections.abc import Sequence
from urllib.parse import urlsplit

from trainops.actions._base import ActionContext, ActionResult, Finding, display_url
from trainops.protocol import ActionSpec

__all__ = ["run_actions"]

_OUTPUT_TAIL = 400
_RESPONSE_LIMIT = 64 * 1024


def run_actions(
    finding: Finding, actions: Sequence[ActionSpec], context: ActionContext
) -> list[ActionResult]:
    """Run every action for ``finding``, in order; returns what each did."""
    return [_run_one(finding, action, context) for action in actions]


def _run_one(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
    try:
        if action.type == "stop_training":
            return _stop(finding, context)
        if action.type == "webhook" and action.url is not None:
            return _webhook(finding, action.url, action.timeout_seconds)
        if action.type == "command" and action.argv:
            return _command(finding, action.argv, action.timeout_seconds)
    except Exception as exc:  # an action's failure is its result
        return ActionResult(action.type, False, f"{type(exc).__name__}: {exc}")
    return ActionResult(action.type, False, "not a complete action")


def _stop(finding: Finding, context: ActionContext) -> ActionResult:
    message = f"Stopped by rule {finding.rule_name}: {finding.details}"[:1024]
    if context.stop_job(finding.job, message):
        return ActionResult("stop_training", True, "the job is stopping")
    return ActionResult("stop_training", True, "the job had ended or was stopping already")


def _webhook(finding: Finding, url: str, timeout: float) -> ActionResult:
    parts = urlsplit(url)
    shown = display_url(url)
    connection_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_type(parts.hostname or "", parts.port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    headers = {"Content-Type": "application/json", "User-Agent": "trainops-rules"}
    try:
        connection.request("POST", target, body=finding.payload(), headers=headers)
        response = connection.getresponse()
        response.read(_RESPONSE_LIMIT)
    except OSError as exc:
        return ActionResult("webhook", False, f"POST {shown} failed: {exc}")
    finally:
        connection.close()
    ok = 200 <= response.status < 300
    return ActionResult("webhook", ok, f"POST {shown}: HTTP {response.status}")


def _command(finding: Finding, argv: Sequence[str], timeout: float) -> ActionResult:
    env = {
        **os.environ,
        "TRAINOPS_JOB": finding.job,
        "TRAINOPS_RULE": finding.rule_name,
        "TRAINOPS_RULE_STATUS": finding.status,
    }
    name = os.path.basename(argv[0])
    try:
        done = subprocess.run(
            list(argv),
            input=finding.payload(),
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
            start_new_session=True,
        )
    except FileNotFoundError:
        return ActionResult("command", False, f"{argv[0]}: no such program")
    except subprocess.TimeoutExpired:
        return ActionResult("command", False, f"{name}: still running after {timeout:g} s, killed")
    tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip()[-_OUTPUT_TAIL:]
    detail = f"{name} exited with {done.returncode}" + (f": {tail}" if tail else "")
    return ActionResult("command", done.returncode == 0, detail)
