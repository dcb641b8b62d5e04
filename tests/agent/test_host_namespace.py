"""A host's namespaces held and joined (``_hostns_exec --hold/--join``), run for real.

The script is never pid 1 and sees only its host's processes; it ends as it would unwrapped
(its exit status, its signal, SIGTERM's default action); a root script keeps only Docker's
default capabilities; a masked directory shows only what is kept, read-only but for the kept
paths; closing the namespaces ends what is left inside. Where no namespace can be made the
processes run as they are and the host log says what is not protected.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agent._support import make_job
from trainops._hostns_caps import DOCKER_DEFAULT, effective_capabilities
from trainops.agent import _ranks
from trainops.agent.contract._setup import ScriptCommand
from trainops.agent.supervision import _hostns
from trainops.agent.supervision._hostns import (
    NO_ISOLATION,
    HostNamespace,
    NamespaceError,
    hold_arguments,
    namespaces_available,
    opt_ml_hint,
    unwrap,
    write_hosts_file,
)
from trainops.protocol import Assignment, HostOutcome, HostResources
from trainops.spec import JobSpec

pytestmark = pytest.mark.skipif(not namespaces_available(), reason="no namespaces here")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "jobs" / "j" / "algo-1" / "code").mkdir(parents=True)
    (home / "jobs" / "other").mkdir(parents=True)
    (home / "token").write_text("secret")
    return home


@pytest.fixture
def namespace(tmp_path: Path, home: Path) -> Iterator[HostNamespace]:
    hosts = write_hosts_file(tmp_path / "hosts", {"algo-1": "127.9.9.1"})
    tree = home / "jobs" / "j" / "algo-1"
    held = HostNamespace.hold(hold_arguments("algo-1", hosts, [], [home], [tree]))
    yield held
    held.close()


def _run(
    namespace: HostNamespace, shell: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    argv = namespace.join(["/bin/sh", "-c", shell], ["algo-1"], None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


def test_the_script_is_not_pid_1_and_sees_its_host_only(namespace: HostNamespace) -> None:
    done = _run(namespace, 'echo $$; hostname; ls /proc | grep -c "^[0-9]"; getent hosts algo-1')
    pid, hostname, count, resolved = done.stdout.split("\n", 3)
    assert done.returncode == 0, done.stderr
    assert int(pid) > 1 and hostname == "algo-1" and int(count) < 10
    assert resolved.startswith("127.9.9.1")


def test_it_ends_as_the_script_ends(namespace: HostNamespace) -> None:
    assert _run(namespace, "exit 7").returncode == 7
    assert _run(namespace, "kill -USR1 $$").returncode == -signal.SIGUSR1
    assert _run(namespace, "/no/such/program").returncode == 127


def test_sigterm_to_the_group_ends_the_script_by_its_default_action(
    namespace: HostNamespace, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    argv = namespace.join(["/bin/sh", "-c", f"touch {ready}; exec sleep 60"], [], None)
    process = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(timeout=30) == -signal.SIGTERM


def test_the_home_is_masked_but_for_the_tree(namespace: HostNamespace, home: Path) -> None:
    tree = home / "jobs" / "j" / "algo-1"
    shell = f"ls {home}; ls {home}/jobs; cat {home}/token; touch {tree}/x; touch {home}/y"
    done = _run(namespace, shell)
    assert done.stdout.split() == ["jobs", "j"]
    assert "token: No such file" in done.stderr and "Read-only file system" in done.stderr
    assert (tree / "x").exists() and not (home / "y").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="capabilities are reduced for a root script")
def test_a_root_script_keeps_docker_s_default_capabilities(namespace: HostNamespace) -> None:
    done = _run(namespace, "cat /proc/self/status; umount /proc")
    assert effective_capabilities(done.stdout) == sum(1 << cap for cap in DOCKER_DEFAULT)
    assert "umount" in done.stderr


def test_closing_ends_what_is_left_inside(namespace: HostNamespace) -> None:
    daemon = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\n"
    subprocess.run(namespace.join([sys.executable, "-c", daemon], [], None), timeout=60, check=True)
    left = psutil.Process(namespace.init_pid).children()  # the orphan, adopted by the init
    assert left, "nothing was left in the namespace"
    namespace.close()
    _, alive = psutil.wait_procs(left, timeout=30)
    assert not alive


def test_a_bad_holder_argument_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NamespaceError, match="No such file or directory"):
        HostNamespace.hold(["--bind", str(tmp_path / "no/such"), str(tmp_path), "ro"])


def _assignment() -> Assignment:
    return Assignment(
        job_name="j",
        attempt=1,
        spec=JobSpec(entry_point="train.py").view(),
        hosts=["algo-1"],
        current_host="algo-1",
        code_uri="",
        output_prefix="file:///tmp/out",
        region="us-east-1",
        resources=HostResources(),
    )


def test_a_single_host_job_joins_its_namespace(tmp_path: Path) -> None:
    command = ScriptCommand([sys.executable, "train.py"], sys.executable, [])
    launch = _ranks.host_processes(_assignment(), command, {}, tmp_path)
    try:
        argv = list(launch.processes[0].argv)
        assert launch.namespace is not None and "--join" in argv and not launch.warnings
        assert argv[argv.index("--resolve") :][:2] == ["--resolve", "algo-1"]
        assert unwrap(argv) == [sys.executable, "train.py"]
    finally:
        if launch.namespace is not None:
            launch.namespace.close()


def test_where_no_namespace_can_be_made_the_log_says_what_is_not_protected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ranks, "namespaces_available", lambda: False)  # such a machine
    command = ScriptCommand([sys.executable, "train.py"], sys.executable, [])
    launch = _ranks.host_processes(_assignment(), command, {}, tmp_path)
    assert launch.processes[0].argv == (sys.executable, "train.py")
    assert launch.namespace is None and launch.warnings == [NO_ISOLATION]
    assert "$TRAINOPS_HOME" in NO_ISOLATION and "unisolated" in NO_ISOLATION


@pytest.mark.parametrize(
    ("failure", "shown", "asked", "says"),
    [
        ("FileNotFoundError: ... '/opt/ml/input/x'", False, False, "set `mount_opt_ml: true`"),
        ("No such file or directory: '/opt/ml/model'", False, True, "cannot show"),
        ("FileNotFoundError: ... '/opt/ml/input/x'", True, True, None),
        ("FileNotFoundError: ... '/data/x'", False, False, None),
        ("PermissionError: '/opt/ml/x'", False, False, None),
    ],
)
def test_the_opt_ml_hint(failure: str, shown: bool, asked: bool, says: str | None) -> None:
    hint = opt_ml_hint(failure, shown, asked)
    assert (hint is None) if says is None else (hint is not None and says in hint)


SAYS_WHERE = "import os\nprint('model dir', os.environ['SM_MODEL_DIR'])\n"


def test_a_machine_without_namespaces_runs_the_job_and_says_what_is_not_protected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_hostns, "_available", False)  # the probe's answer on such a machine
    job = make_job(tmp_path, {"train.py": SAYS_WHERE})
    assert job.run().outcome is HostOutcome.COMPLETED
    agent = job.reporter.lines("agent")
    assert any(NO_ISOLATION in line for line in agent)
    assert any("/opt/ml is not shown" in line for line in agent)
    assert f"model dir {job.root / 'model'}" in job.reporter.lines("stdout")


def test_a_checkpoint_under_opt_ml_is_refused_where_opt_ml_cannot_be_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_hostns, "_available", False)
    remote = (tmp_path / "ckpt").as_uri()
    job = make_job(tmp_path, {"train.py": SAYS_WHERE}, checkpoint={"uri": remote})
    result = job.run()
    assert result.outcome is HostOutcome.FAILED and result.failure_reason is not None
    assert "/opt/ml/checkpoints" in result.failure_reason
    assert "mount_opt_ml: false" in result.failure_reason
    opted_out = make_job(
        tmp_path / "out", {"train.py": SAYS_WHERE}, checkpoint={"uri": remote}, mount_opt_ml=False
    )
    assert opted_out.run().outcome is HostOutcome.COMPLETED


def test_a_holder_that_fails_after_the_probe_leaves_the_host_without_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_hostns, "_available", True)  # restored after: the fallback clears it
    real = _ranks.hold_arguments
    gone = tmp_path / "gone"

    def with_a_bind_that_fails(*args: Any, **kwargs: Any) -> list[str]:
        # A bind whose source is gone: the real holder fails after the probe passed.
        return [*real(*args, **kwargs), "--bind", str(gone), str(tmp_path), "ro"]

    monkeypatch.setattr(_ranks, "hold_arguments", with_a_bind_that_fails)
    job = make_job(tmp_path / "job", {"train.py": SAYS_WHERE})
    assert job.run().outcome is HostOutcome.COMPLETED
    agent = job.reporter.lines("agent")
    [note] = [line for line in agent if "namespaces could not be made" in line]
    assert "although this machine's probe allowed them" in note and "\n" not in note
    assert any(NO_ISOLATION in line for line in agent)  # what that leaves unprotected
    assert f"model dir {job.root / 'model'}" in job.reporter.lines("stdout")  # not /opt/ml
