"""Custom rules: the job's own rule class, run by the debugger-rules service in a confined
process, never in the server; and what a hostile rule cannot do there."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

from tests.debugger_rules._series import Series, write_series
from tests.debugger_rules.test_service import Plane
from trainops._errors import SpecError
from trainops._settings import Settings
from trainops.agent.reporting._debug_sync import DebugSync
from trainops.archive import pack
from trainops.control.services import ServiceContext
from trainops.debugger.rules._sandbox import landlock_abi
from trainops.rules import DebuggerRulesService
from trainops.storage import store_for
from trainops.store import JobRecord

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")

_RULE = """
import numpy as np
from trainops.debugger.rules import Rule


class BigWeights(Rule):
    def __init__(self, base_trial, limit="10"):
        super().__init__(base_trial)
        self.limit = float(limit)

    def invoke_at_step(self, step):
        value = self.base_trial.tensor("fc.weight").value(step)
        return bool(np.abs(value).max() > self.limit)
"""

_SMDEBUG_STYLE = '''
from trainops.debugger.rules import Rule


class Reads(Rule):
    """A hostile rule: it reads {target!r} and says what it got."""

    def __init__(self, base_trial):
        super().__init__(base_trial, action_str="")

    def invoke_at_step(self, step):
        {action}
        return False
'''


def _deadline_tick(
    service: DebuggerRulesService, plane: Plane, name: str, status: str, details: str = ""
) -> Any:
    """Tick until the rule's row has ``status`` (and ``details`` in its details; at most 60 s:
    the process starts Python)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        plane.now += 1  # each tick a second later on the service's clock
        service.tick()
        row = plane.row(name)
        if row.status == status and details in row.status_details:
            return row
        time.sleep(0.1)
    return plane.row(name)


class CustomPlane(Plane):
    def submit_custom(
        self, code: Path, source: str, cls: str, form: str = "parameters", **parameters: str
    ) -> JobRecord:
        """A job with the custom rule ``Mine``: in SageMaker's ``Rule.custom`` form (``sdk``:
        ``source`` and ``rule_to_invoke`` beside the name) or as rule parameters."""
        archive = pack(code, self.tensors.parent.parent / "sourcedir.tar.gz")
        rule: dict[str, Any] = {"name": "Mine", "rule_parameters": dict(parameters)}
        if form == "sdk":
            rule |= {"source": source, "rule_to_invoke": cls}
        else:
            rule["rule"] = "custom"
            rule["rule_parameters"] |= {"source": source, "rule_to_invoke": cls}
        return self.submit([rule], code_uri=archive.as_uri())


@pytest.fixture
def custom(tmp_path: Path) -> Iterator[CustomPlane]:
    made = CustomPlane(tmp_path)
    yield made
    made.store.close()


def _code(tmp_path: Path, text: str) -> Path:
    code = tmp_path / "code"
    (code / "rules").mkdir(parents=True)
    (code / "train.py").write_text("print('train')\n")
    (code / "rules" / "mine.py").write_text(text)
    return code


def _weights(plane: Plane, values: list[float]) -> None:
    series = Series()
    for step, value in enumerate(values):
        series.add(step, **{"fc.weight": np.full((2, 2), value, np.float32)})
    write_series(plane.tensors, series, end=False)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["parameters", "sdk"])
def test_a_custom_rule_fires_from_its_own_process(
    custom: CustomPlane, tmp_path: Path, form: str
) -> None:
    code = _code(tmp_path, _RULE)
    job = custom.submit_custom(code, "rules/mine.py", "BigWeights", form, limit="5")
    service = DebuggerRulesService(custom.context)
    service.job_changed(job)
    _weights(custom, [1.0, 2.0])
    quiet = _deadline_tick(service, custom, "Mine", "InProgress", "up to step 1")
    assert quiet.status_details == "no issue in 2 steps evaluated (up to step 1)"
    _weights(custom, [1.0, 2.0, 50.0])
    row = _deadline_tick(service, custom, "Mine", "IssuesFound")
    service.close()
    assert row.status == "IssuesFound", row.status_details
    assert "step 2" in row.status_details


_SHOUTS = """
import os
from trainops.debugger.rules import Rule


class Shouts(Rule):
    \"\"\"Writes JSON nested past the decoder's recursion to the verdict pipe, then fires.\"\"\"

    def invoke_at_step(self, step):
        os.write(1, b"[" * 100000 + b"\\n")
        return step >= 1
"""


@pytest.mark.slow
def test_a_rule_writing_its_own_lines_to_the_verdict_pipe_is_still_heard(
    custom: CustomPlane, tmp_path: Path
) -> None:
    job = custom.submit_custom(_code(tmp_path, _SHOUTS), "rules/mine.py", "Shouts")
    service = DebuggerRulesService(custom.context)
    service.job_changed(job)
    _weights(custom, [1.0, 2.0])
    row = _deadline_tick(service, custom, "Mine", "IssuesFound")
    service.close()
    assert row.status == "IssuesFound", row.status_details


@pytest.mark.slow
def test_a_healthy_custom_rule_ends_with_no_issues(custom: CustomPlane, tmp_path: Path) -> None:
    job = custom.submit_custom(_code(tmp_path, _RULE), "rules/mine.py", "BigWeights")
    service = DebuggerRulesService(custom.context)
    service.job_changed(job)
    _weights(custom, [1.0, 2.0])
    service.tick()
    service.job_changed(custom.end())
    row = custom.row("Mine")
    assert row.status == "NoIssuesFound", row.status_details


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "action", "refused"),
    [
        ("the store", "open(TARGET).read()", "PermissionError"),
        ("a file", "open(ESCAPED, 'w').write('x')", "PermissionError"),
        (
            "the network",
            "__import__('socket').create_connection(('127.0.0.1', 9))",
            "PermissionError",
        ),
        ("memory", "bytearray(4 << 30)", "ran out of memory"),
        (
            "the server's process",
            "__import__('os').kill(SERVER, 0)",
            "PermissionError|ProcessLookupError",  # not in its PID namespace
        ),
        (
            "the server's memory",
            "open('/proc/SERVER/environ').read()",
            "PermissionError",
        ),
        ("the environment", "raise RuntimeError(sorted(__import__('os').environ))", "PATH"),
    ],
)
def test_a_hostile_custom_rule_is_confined(
    custom: CustomPlane, tmp_path: Path, target: str, action: str, refused: str
) -> None:
    db = str(tmp_path / "trainops.db")
    escaped = tmp_path / "escaped-by-rule"
    action = action.replace("TARGET", repr(db)).replace("ESCAPED", repr(str(escaped)))
    action = action.replace("SERVER", str(os.getpid()))  # the service runs in this process
    text = _SMDEBUG_STYLE.format(target=target, action=action)
    job = custom.submit_custom(_code(tmp_path, text), "rules/mine.py", "Reads")
    service = DebuggerRulesService(custom.context)
    service.job_changed(job)
    _weights(custom, [1.0])
    row = _deadline_tick(service, custom, "Mine", "Error")
    service.close()
    assert row.status == "Error", row.status_details
    assert any(word in row.status_details for word in refused.split("|")), row.status_details
    assert not escaped.exists()
    if target == "the environment":
        assert "TRAINOPS" not in row.status_details and "AWS" not in row.status_details


_LINGERS = """
import ctypes, os, time
from trainops.debugger.rules import Rule


class Lingers(Rule):
    \"\"\"Starts a process in a session of its own, named {name!r}, meant to outlive the rule.\"\"\"

    def invoke_at_step(self, step):
        if os.fork() == 0:
            os.setsid()
            ctypes.CDLL(None).prctl(15, {name!r}.encode(), 0, 0, 0)  # PR_SET_NAME
            time.sleep(300)
            os._exit(0)
        return False
"""


def _named(name: str) -> list[int]:
    """The processes whose name (``/proc/<pid>/comm``) is ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_what_a_custom_rule_starts_ends_with_it(custom: CustomPlane, tmp_path: Path) -> None:
    """A process the rule starts, even in a new session, ends when the rule's does (the rule
    runs as pid 1 of a PID namespace of its own): nothing of a job's code outlives its rule."""
    name = f"linger{os.getpid() % 100000}"
    code = _code(tmp_path, _LINGERS.format(name=name))
    service = DebuggerRulesService(custom.context)
    service.job_changed(custom.submit_custom(code, "rules/mine.py", "Lingers"))
    _weights(custom, [1.0])
    _deadline_tick(service, custom, "Mine", "InProgress", "up to step 0")
    assert _named(name), "the rule's child did not start"
    service.job_changed(custom.end())
    assert custom.row("Mine").status == "NoIssuesFound", custom.row("Mine").status_details
    service.close()
    deadline = time.monotonic() + 30
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _named(name)
    for pid in left:  # the test's own leftovers, by their id
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_custom_rules_refuse_a_source_outside_the_job(custom: CustomPlane) -> None:
    with pytest.raises(SpecError, match=r"must be a \.py file inside the job's source folder"):
        custom.submit(
            [
                {
                    "rule": "custom",
                    "rule_parameters": {"source": "../../etc/x.py", "rule_to_invoke": "X"},
                }
            ]
        )


class S3CustomPlane(CustomPlane):
    """A job whose debug output is in S3 (SeaweedFS), put there by the hosts' real sync."""

    def __init__(self, tmp_path: Path, settings: Settings, bucket: str) -> None:
        super().__init__(tmp_path)
        self.output = f"s3://{bucket}/job-a"
        self.context = ServiceContext(self.store, settings, self._stop, lambda: self.now)
        remote = f"{self.output}/debug-output"
        self.sync = DebugSync(self.tensors, remote, store_for(remote, settings), print)

    def weights(self, values: list[float]) -> None:
        _weights(self, values)
        self.sync.sync_once()


@pytest.mark.slow
def test_a_custom_rule_reads_a_jobs_tensors_in_s3_without_its_credentials(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str
) -> None:
    plane = S3CustomPlane(tmp_path, s3_settings, s3_bucket)
    job = plane.submit_custom(_code(tmp_path, _RULE), "rules/mine.py", "BigWeights", limit="5")
    service = DebuggerRulesService(plane.context)
    service.job_changed(job)
    plane.weights([1.0, 2.0])
    quiet = _deadline_tick(service, plane, "Mine", "InProgress", "up to step 1")
    assert quiet.status_details == "no issue in 2 steps evaluated (up to step 1)"
    plane.weights([1.0, 2.0, 50.0])
    row = _deadline_tick(service, plane, "Mine", "IssuesFound")
    service.close()
    plane.store.close()
    assert row.status == "IssuesFound", row.status_details
    assert "step 2" in row.status_details


@pytest.mark.slow
@pytest.mark.parametrize("attempt", ["trial", "socket", "settings"])
def test_a_hostile_custom_rule_cannot_reach_the_jobs_bucket(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str, attempt: str
) -> None:
    plane = S3CustomPlane(tmp_path, s3_settings, s3_bucket)
    endpoint = urlsplit(str(s3_settings.s3.endpoint_url))
    action = {  # the bucket through the trial API, the server's port, the server's settings
        "trial": f"__import__('trainops.debugger').debugger.create_trial("
        f"'s3://{s3_bucket}/job-a/debug-output').steps()",
        "socket": f"__import__('socket').create_connection(('127.0.0.1', {endpoint.port}))",
        "settings": f"open({str(s3_settings.home / 'config.toml')!r}).read()",
    }[attempt]
    (s3_settings.home / "config.toml").write_text("[s3]\n")
    text = _SMDEBUG_STYLE.format(target="the bucket", action=action)
    job = plane.submit_custom(_code(tmp_path, text), "rules/mine.py", "Reads")
    service = DebuggerRulesService(plane.context)
    service.job_changed(job)
    plane.weights([1.0])
    row = _deadline_tick(service, plane, "Mine", "Error")
    service.close()
    plane.store.close()
    assert row.status == "Error", row.status_details
    assert ("StorageError" if attempt == "trial" else "PermissionError") in row.status_details
    assert s3_settings.s3.secret_access_key not in row.status_details
