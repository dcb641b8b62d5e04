"""Running a finding's actions: stop the job, POST to a webhook, or run a local command.

Each kind is a runner registered in :data:`ACTIONS` under the spec's action type; an action of a
kind that is not registered is a failed result naming the known kinds.

Each action is bounded by its ``timeout_seconds`` and its failure is a result, never an
exception: one broken webhook does not keep the job from being stopped. A webhook goes only
to an address the server's settings allow (``_destinations.py``: public addresses, and the
networks ``webhook_networks`` names), to the address checked, never following a redirect. A
command runs without a shell (its ``argv`` as given), in a scratch folder of its own, with the
finding as JSON on standard input and the job's recorded environment (``_environment.py``), never
the server's; it runs in its own session, which is killed at the timeout and when it exits, and
only the tail of its output is kept.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from trainops._registry import Registry
from trainops.actions._base import ActionContext, ActionResult, Finding, display_url
from trainops.actions._destinations import WebhookPolicy, resolve_checked
from trainops.actions._environment import base_variables
from trainops.protocol import ActionSpec

__all__ = ["ACTIONS", "ActionRunner", "run_actions"]

_OUTPUT_TAIL = 400
_RESPONSE_LIMIT = 64 * 1024


#: ``run(finding, action, context)``: does one action of its kind, returns what it did (an
#: incomplete action, e.g. a webhook without ``url``, is a failed result).
ActionRunner = Callable[[Finding, ActionSpec, ActionContext], ActionResult]

#: action kind (``ActionSpec.type``, the spec's ``ActionKind``) -> its runner, in the spec's order.
ACTIONS: Registry[ActionRunner] = Registry("action kind", error=ValueError)


def run_actions(
    finding: Finding, actions: Sequence[ActionSpec], context: ActionContext
) -> list[ActionResult]:
    """Run every action for ``finding``, in order; returns what each did."""
    return [_run_one(finding, action, context) for action in actions]


def _run_one(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
    try:
        return ACTIONS.lookup(action.type)(finding, action, context)
    except Exception as exc:  # an action's failure is its result
        return ActionResult(action.type, False, f"{type(exc).__name__}: {exc}")


def _incomplete(action: ActionSpec) -> ActionResult:
    return ActionResult(action.type, False, "not a complete action")


@ACTIONS.register("stop_training")
def _stop(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
    del action
    message = f"Stopped by rule {finding.rule_name}: {finding.details}"[:1024]
    if context.stop_job(finding.job, message):
        return ActionResult("stop_training", True, "the job is stopping")
    return ActionResult("stop_training", True, "the job had ended or was stopping already")


@ACTIONS.register("webhook")
def _post(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
    if action.url is None:
        return _incomplete(action)
    return _webhook(finding, action.url, action.timeout_seconds, context.webhooks)


@ACTIONS.register("command")
def _run_command(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
    if not action.argv:
        return _incomplete(action)
    return _command(finding, list(action.argv), action.timeout_seconds, context)


def _webhook(finding: Finding, url: str, timeout: float, policy: WebhookPolicy) -> ActionResult:
    parts = urlsplit(url)
    shown = display_url(url)
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    try:
        addresses = resolve_checked(parts.hostname or "", port, policy)
    except PermissionError as exc:
        return ActionResult("webhook", False, f"POST {shown} refused: {exc}")
    except OSError as exc:
        return ActionResult("webhook", False, f"POST {shown} failed: {exc}")
    connection = _PinnedConnection(parts.hostname or "", port, addresses, timeout, https=https)
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
    moved = " (redirects are not followed)" if 300 <= response.status < 400 else ""
    return ActionResult("webhook", ok, f"POST {shown}: HTTP {response.status}{moved}")


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to one of ``addresses``, the checked addresses of ``host`` (tried
    in order; ``host`` still names the server in the Host header and, over TLS, in SNI and the
    certificate check)."""

    def __init__(
        self, host: str, port: int, addresses: list[str], timeout: float, *, https: bool
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._addresses = addresses
        self._tls = ssl.create_default_context() if https else None

    def connect(self) -> None:
        failure: OSError | None = None
        for address in self._addresses:
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
                break
            except OSError as exc:
                failure = exc
        else:
            raise failure or OSError("no address to connect to")
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        self.sock = sock


def _command(
    finding: Finding, argv: list[str], timeout: float, context: ActionContext
) -> ActionResult:
    """On the job's first host while it runs; else here, saying so and why."""
    variables = {
        "TRAINOPS_JOB": finding.job,
        "TRAINOPS_RULE": finding.rule_name,
        "TRAINOPS_RULE_STATUS": finding.status,
    }
    why = ""
    if context.on_host is not None:
        outcome = context.on_host(argv, finding.payload().decode(), variables, timeout)
        if not isinstance(outcome, str):
            return _host_result(argv, timeout, outcome)
        why = f": {outcome}"
    result = _local_command(finding, argv, timeout, context.environment, variables)
    where = f" [run by the control plane with the job's recorded environment{why}]"
    return ActionResult("command", result.ok, result.detail + where)


def _host_result(argv: Sequence[str], timeout: float, outcome: Mapping[str, Any]) -> ActionResult:
    """The result of a command a host ran (its report's fields are checked, never trusted)."""
    name = os.path.basename(argv[0])
    host = str(outcome.get("host", "?"))[:64]
    if outcome.get("ran") is not True:
        error = str(outcome.get("error") or "not run")[:_OUTPUT_TAIL]
        return ActionResult("command", False, f"{name} on {host}: {error}")
    tail = str(outcome.get("output") or "").strip()[-_OUTPUT_TAIL:]
    shown = f": {tail}" if tail else ""
    if outcome.get("timed_out") is True:
        line = f"{name} on {host}: still running after {timeout:g} s, killed{shown}"
        return ActionResult("command", False, line)
    code = outcome.get("exit_code")
    code = code if type(code) is int else None
    return ActionResult("command", code == 0, f"{name} exited with {code} on {host}{shown}")


def _local_command(
    finding: Finding,
    argv: Sequence[str],
    timeout: float,
    environment: Mapping[str, str],
    variables: Mapping[str, str],
) -> ActionResult:
    name = os.path.basename(argv[0])
    with tempfile.TemporaryDirectory(prefix="trainops-action-") as scratch:
        env = {**base_variables(scratch), **environment, **variables}
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=scratch,
                start_new_session=True,
            )
        except FileNotFoundError:
            return ActionResult("command", False, f"{argv[0]}: no such program")
        try:
            output, _ = process.communicate(finding.payload(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return ActionResult(
                "command", False, f"{name}: still running after {timeout:g} s, killed"
            )
        finally:
            _kill_group(process)  # what it left running in its session goes too
    tail = output.decode("utf-8", "replace").strip()[-_OUTPUT_TAIL:]
    detail = f"{name} exited with {process.returncode}" + (f": {tail}" if tail else "")
    return ActionResult("command", process.returncode == 0, detail)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End the command's session (it leads its own process group), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()  # a child that left the session may hold the other end: not waited on
