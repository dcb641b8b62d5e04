"""The action mechanism: every kind does what it says against real parts (a local HTTP server,
real processes), and a failing action is a result, never an exception."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from trainops import JobSpec
from trainops.actions import (
    ActionContext,
    Finding,
    WebhookPolicy,
    display_url,
    job_environment,
    run_actions,
)
from trainops.protocol import ActionSpec

FINDING = Finding(
    job="job-1",
    rule_name="slow-steps",
    rule="StepOutlier",
    status="IssuesFound",
    details="12 steps slower than mean + 3 sigma",
    recommendation="look at step 25",
    evidence={"outliers": 12},
    time=1700000000.0,
)


def _action(kind: str, **fields: Any) -> ActionSpec:
    return ActionSpec(
        type=kind,
        url=fields.get("url"),
        argv=fields.get("argv"),
        timeout_seconds=fields.get("timeout", 5.0),
    )


class _Hook:
    """A webhook receiver on 127.0.0.1 that answers ``status`` and keeps what it received."""

    def __init__(self, status: int = 204, delay: float = 0.0) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                hook.received.append((self.path, dict(self.headers), body))
                if delay:
                    threading.Event().wait(delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def hook() -> Iterator[_Hook]:
    server = _Hook()
    yield server
    server.close()


def _no_stop(job: str, message: str) -> bool:
    raise AssertionError(f"nothing should stop {job}: {message}")


# The test webhooks listen on 127.0.0.1, which a server reaches only when its settings allow.
LOOPBACK = ActionContext(_no_stop, webhooks=WebhookPolicy.from_names(["loopback"]))


def test_webhook_posts_the_finding_as_json(hook: _Hook) -> None:
    [result] = run_actions(
        FINDING,
        [_action("webhook", url=f"{hook.url}/hooks/T0/secret?x=1")],
        LOOPBACK,
    )
    assert result.ok, result
    assert "secret" not in result.detail and "HTTP 204" in result.detail
    [(path, headers, body)] = hook.received
    assert path == "/hooks/T0/secret?x=1"
    assert headers["Content-Type"] == "application/json"
    payload = json.loads(body)
    assert payload["source"] == "trainops"
    assert payload["job"] == "job-1" and payload["rule"] == "StepOutlier"
    assert payload["evidence"] == {"outliers": 12}


def test_a_webhook_answering_an_error_is_a_failed_result() -> None:
    server = _Hook(status=500)
    try:
        [result] = run_actions(FINDING, [_action("webhook", url=server.url)], LOOPBACK)
    finally:
        server.close()
    assert not result.ok and "HTTP 500" in result.detail


def test_an_unreachable_webhook_fails_and_later_actions_still_run() -> None:
    stopped: list[tuple[str, str]] = []

    def stop(job: str, message: str) -> bool:
        stopped.append((job, message))
        return True

    # A port nothing listens on: bind one, close it, use its number.
    probe = _Hook()
    dead = probe.url
    probe.close()
    results = run_actions(
        FINDING,
        [_action("webhook", url=dead, timeout=2.0), _action("stop_training")],
        ActionContext(stop, webhooks=LOOPBACK.webhooks),
    )
    assert [r.type for r in results] == ["webhook", "stop_training"]
    assert not results[0].ok and "failed" in results[0].detail
    assert results[1].ok and results[1].detail == "the job is stopping"
    assert stopped == [("job-1", "Stopped by rule slow-steps: " + FINDING.details)]


def test_a_slow_webhook_is_cut_at_its_timeout() -> None:
    server = _Hook(delay=3.0)
    try:
        [result] = run_actions(FINDING, [_action("webhook", url=server.url, timeout=0.5)], LOOPBACK)
    finally:
        server.close()
    assert not result.ok and "timed out" in result.detail


def test_stop_on_an_ended_job_says_so() -> None:
    [result] = run_actions(FINDING, [_action("stop_training")], ActionContext(lambda j, m: False))
    assert result.ok and "ended or was stopping" in result.detail


def test_command_gets_the_finding_on_stdin_and_its_environment(tmp_path: Any) -> None:
    out = tmp_path / "seen.json"
    code = (
        "import json, os, sys; "
        "data = json.load(sys.stdin); "
        "env = {k: os.environ[k] for k in ('TRAINOPS_JOB', 'TRAINOPS_RULE', 'TRAINOPS_RULE_STATUS')}; "
        f"open({str(out)!r}, 'w').write(json.dumps([data, env])); print('noted')"
    )
    [result] = run_actions(
        FINDING, [_action("command", argv=(sys.executable, "-c", code))], ActionContext(_no_stop)
    )
    assert result.ok and "exited with 0: noted" in result.detail
    assert result.detail.endswith("[run by the control plane with the job's recorded environment]")
    data, env = json.loads(out.read_text())
    assert data["rule_name"] == "slow-steps"
    assert env == {
        "TRAINOPS_JOB": "job-1",
        "TRAINOPS_RULE": "slow-steps",
        "TRAINOPS_RULE_STATUS": "IssuesFound",
    }


def test_command_arguments_are_never_a_shell(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    argv = (sys.executable, "-c", "import sys; print(sys.argv[1:])", f"; touch {marker}")
    [result] = run_actions(FINDING, [_action("command", argv=argv)], ActionContext(_no_stop))
    assert result.ok and not marker.exists()


def test_command_failures_are_results() -> None:
    results = run_actions(
        FINDING,
        [
            _action("command", argv=("/nonexistent/notify",)),
            _action("command", argv=(sys.executable, "-c", "import sys; sys.exit(3)")),
            _action(
                "command", argv=(sys.executable, "-c", "import time; time.sleep(30)"), timeout=0.5
            ),
        ],
        ActionContext(_no_stop),
    )
    assert [r.ok for r in results] == [False, False, False]
    assert "no such program" in results[0].detail
    assert "exited with 3" in results[1].detail
    assert "killed" in results[2].detail


def test_display_url_keeps_no_path_or_query() -> None:
    assert (
        display_url("https://hooks.slack.com/services/T0/B0/XYZ") == "https://hooks.slack.com/***"
    )
    assert display_url("http://127.0.0.1:8080/?token=abc") == "http://127.0.0.1:8080/***"
    assert display_url("http://example.org") == "http://example.org"


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("localhost", "loopback"),  # a name is resolved, and its addresses checked
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("169.254.169.254", "link-local"),  # a cloud's metadata endpoint
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("0.0.0.0", "reserved"),
    ],
)
def test_a_webhook_to_an_internal_address_is_refused_by_default(
    hook: _Hook, host: str, kind: str
) -> None:
    # Refused before any connection: no packet ever leaves for these addresses.
    port = hook.server.server_address[1]
    [result] = run_actions(
        FINDING, [_action("webhook", url=f"http://{host}:{port}/x")], ActionContext(_no_stop)
    )
    assert not result.ok and "refused" in result.detail, result
    assert f"a {kind}" in result.detail and "webhook_networks" in result.detail
    assert "/x" not in result.detail  # the path stays secret here too
    assert hook.received == []


def test_a_webhook_to_loopback_goes_when_the_settings_allow_it(hook: _Hook) -> None:
    url = hook.url.replace("127.0.0.1", "localhost")
    for context in (
        LOOPBACK,
        ActionContext(_no_stop, webhooks=WebhookPolicy.from_names(["127.0.0.0/8", "::1/128"])),
    ):
        [result] = run_actions(FINDING, [_action("webhook", url=url)], context)
        assert result.ok, result
    assert len(hook.received) == 2
    # Allowing loopback allows nothing else.
    [other] = run_actions(FINDING, [_action("webhook", url="http://10.0.0.1/")], LOOPBACK)
    assert not other.ok and "10.0.0.1, a private address" in other.detail


def test_a_redirect_is_not_followed() -> None:
    server = _Hook(status=307)
    try:
        [result] = run_actions(FINDING, [_action("webhook", url=server.url)], LOOPBACK)
    finally:
        server.close()
    assert not result.ok and "HTTP 307 (redirects are not followed)" in result.detail


def test_a_bad_network_name_is_refused() -> None:
    with pytest.raises(ValueError, match="'intranet' is not a network"):
        WebhookPolicy.from_names(["intranet"])


def test_a_command_gets_the_jobs_environment_and_none_of_the_servers(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the control plane's own environment holds must not reach the command.
    for name, value in {
        "TRAINOPS_TOKEN": "server-api-token",
        "TRAINOPS_HOME": str(tmp_path / "home"),
        "AWS_ACCESS_KEY_ID": "AKIASERVER",
        "AWS_SECRET_ACCESS_KEY": "server-secret",
        "AWS_SESSION_TOKEN": "server-session",
    }.items():
        monkeypatch.setenv(name, value)
    spec = JobSpec(
        entry_point="train.py",
        instance_count=2,
        hyperparameters={"epochs": 3, "lr": 0.1},
        environment={"MY_SETTING": "on"},
    ).view()
    environment = job_environment("job-1", spec, ["algo-1", "algo-2"])
    out = tmp_path / "env.json"
    code = f"import json, os; open({str(out)!r}, 'w').write(json.dumps(dict(os.environ)))"
    context = ActionContext(_no_stop, environment=environment)
    [result] = run_actions(
        FINDING, [_action("command", argv=(sys.executable, "-c", code))], context
    )
    assert result.ok, result
    env = json.loads(out.read_text())
    assert not {k for k in env if k.startswith(("AWS_", "TRAINOPS_HOME", "TRAINOPS_TOKEN"))}
    assert not any("server" in v for v in env.values())
    assert env["SM_CURRENT_HOST"] == "algo-1"
    assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"]
    assert json.loads(env["SM_HPS"]) == {"epochs": 3, "lr": 0.1}
    assert env["SM_HP_EPOCHS"] == "3" and env["SM_USER_ENTRY_POINT"] == "train.py"
    assert env["TRAINING_JOB_NAME"] == "job-1" and env["MY_SETTING"] == "on"
    assert env["TRAINOPS_JOB"] == "job-1" and env["HOME"] == env["TMPDIR"]


def test_a_command_goes_to_the_jobs_host_while_one_runs_it() -> None:
    asked: list[tuple[list[str], str, dict[str, str], float]] = []

    def on_host(argv: list[str], stdin: str, variables: dict[str, str], timeout: float) -> Any:
        asked.append((argv, stdin, variables, timeout))
        return {"host": "algo-1", "ran": True, "exit_code": 0, "output": "done\n"}

    argv = ("/nonexistent/notify", "--flag")  # never run here: the host ran it
    context = ActionContext(_no_stop, on_host=on_host)
    [result] = run_actions(FINDING, [_action("command", argv=argv, timeout=7.0)], context)
    assert (result.ok, result.detail) == (True, "notify exited with 0 on algo-1: done")
    [(sent, stdin, variables, timeout)] = asked
    assert sent == list(argv) and timeout == 7.0
    assert json.loads(stdin)["rule_name"] == "slow-steps"
    assert variables == {
        "TRAINOPS_JOB": "job-1",
        "TRAINOPS_RULE": "slow-steps",
        "TRAINOPS_RULE_STATUS": "IssuesFound",
    }


@pytest.mark.parametrize(
    ("report", "ok", "detail"),
    [
        ({"host": "algo-1", "ran": True, "exit_code": 4, "output": ""}, False, "exited with 4"),
        (
            {"host": "algo-1", "ran": True, "timed_out": True, "output": "waiting"},
            False,
            "on algo-1: still running after 5 s, killed: waiting",
        ),
        ({"host": "algo-1", "ran": False, "error": "not now"}, False, "on algo-1: not now"),
        ({"host": "algo-1", "ran": True, "exit_code": "0"}, False, "exited with None"),
        ({"ran": "yes", "exit_code": 0}, False, "on ?: not run"),
    ],
)
def test_a_hosts_report_is_checked_not_trusted(report: Any, ok: bool, detail: str) -> None:
    context = ActionContext(_no_stop, on_host=lambda *_: report)
    [result] = run_actions(FINDING, [_action("command", argv=("notify",))], context)
    assert result.ok is ok
    assert detail in result.detail, result.detail


def test_with_no_host_left_the_control_plane_runs_it_and_says_why(tmp_path: Any) -> None:
    out = tmp_path / "ran"
    code = f"open({str(out)!r}, 'w').write('yes')"
    context = ActionContext(_no_stop, on_host=lambda *_: "the job's hosts have ended")
    [result] = run_actions(
        FINDING, [_action("command", argv=(sys.executable, "-c", code))], context
    )
    assert result.ok and out.read_text() == "yes"
    assert result.detail.endswith(
        "[run by the control plane with the job's recorded environment: the job's hosts have ended]"
    )
