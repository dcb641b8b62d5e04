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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agent._support import make_job
from trainops._hostns_caps import DOCKER_DEFAULT, effective_capabilities
from trainops.agent import _ranks
from trainops.agent.contract._setup import ScriptCommand
from trainops.agent.supervision import _hostns, _reaper
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
from trainops.agent.supervision._process import ScriptProcess
from trainops.agent.supervision._reaper import ProcessTree
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


Runner = Callable[[str], subprocess.CompletedProcess[str]]
NO_CGROUP = ProcessTree("test/held", use_cgroup=False)


@pytest.fixture
def arguments(tmp_path: Path, home: Path) -> list[str]:
    hosts = write_hosts_file(tmp_path / "hosts", {"algo-1": "127.9.9.1"})
    tree = home / "jobs" / "j" / "algo-1"
    return hold_arguments("algo-1", hosts, [], [home], [tree])


@pytest.fixture
def namespace(arguments: list[str]) -> Iterator[HostNamespace]:
    held = HostNamespace.hold(arguments)
    yield held
    held.close()


@pytest.fixture(params=["joined", "held"])
def run(request: pytest.FixtureRequest, arguments: list[str]) -> Runner:
    """A shell command run as the host's processes are: joined into the namespaces (``--join``,
    a host of several processes) or started by the holder itself (a host of one process)."""
    if request.param == "joined":
        namespace: HostNamespace = request.getfixturevalue("namespace")
        return lambda shell: _run(namespace, shell)
    return lambda shell: _run_held(arguments, shell)


def _run(
    namespace: HostNamespace, shell: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    argv = namespace.join(["/bin/sh", "-c", shell], ["algo-1"], None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


def _run_held(arguments: list[str], shell: str) -> subprocess.CompletedProcess[str]:
    """``shell`` started by a fresh holder (one process per holder), which ends as it ends."""
    namespace = HostNamespace.hold(arguments)
    try:
        start = namespace.run_held(["algo-1"])
        process = start(["/bin/sh", "-c", shell], Path.cwd(), dict(os.environ), NO_CGROUP)
        out, err = process.communicate(timeout=60)
        return subprocess.CompletedProcess(
            process.args, process.returncode, out.decode(), err.decode()
        )
    finally:
        namespace.close()


def test_the_script_is_not_pid_1_and_sees_its_host_only(run: Runner) -> None:
    done = run('echo $$; hostname; ls /proc | grep -c "^[0-9]"; getent hosts algo-1')
    pid, hostname, count, resolved = done.stdout.split("\n", 3)
    assert done.returncode == 0, done.stderr
    assert int(pid) > 1 and hostname == "algo-1" and int(count) < 10
    assert resolved.startswith("127.9.9.1")


def test_it_ends_as_the_script_ends(run: Runner) -> None:
    assert run("exit 7").returncode == 7
    assert run("kill -USR1 $$").returncode == -signal.SIGUSR1
    assert run("/no/such/program").returncode == 127


def test_a_held_script_gets_its_environment_and_directory_and_no_stdin(
    arguments: list[str], tmp_path: Path
) -> None:
    shell = 'echo "$ONLY_HERE"; pwd; readlink /proc/self/fd/0; echo "$PATH"'
    namespace = HostNamespace.hold(arguments)
    try:
        start = namespace.run_held(["algo-1"])
        env = {"ONLY_HERE": "a b=c", "PATH": "/usr/bin:/bin"}
        process = start(["/bin/sh", "-c", shell], tmp_path, env, NO_CGROUP)
        out, _ = process.communicate(timeout=60)
    finally:
        namespace.close()
    assert out.decode().splitlines() == ["a b=c", str(tmp_path), "/dev/null", "/usr/bin:/bin"]


def test_a_held_script_s_group_gets_a_stop_and_what_it_left_goes_with_it(
    arguments: list[str], tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    daemon = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\n"
    shell = f"{sys.executable} -c '{daemon}'; touch {ready}; exec sleep 60"
    namespace = HostNamespace.hold(arguments)
    try:
        start = namespace.run_held(["algo-1"])
        process = start(["/bin/sh", "-c", shell], tmp_path, dict(os.environ), NO_CGROUP)
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        left = psutil.Process(namespace.init_pid).children()  # the orphan, adopted by the init
        assert left, "nothing was left in the namespace"
        os.killpg(process.pid, signal.SIGTERM)  # as a stop sends it: the script's default
        assert process.wait(timeout=30) == -signal.SIGTERM
        _, alive = psutil.wait_procs(left, timeout=30)  # the holder ended, and the init with it
        assert not alive
    finally:
        namespace.close()


def test_a_held_command_with_a_nul_byte_is_refused(namespace: HostNamespace) -> None:
    start = namespace.run_held(["algo-1"])
    with pytest.raises(ValueError, match="NUL byte"):
        start(["/bin/echo", "a\0b"], Path.cwd(), {}, NO_CGROUP)


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


def test_the_home_is_masked_but_for_the_tree(run: Runner, home: Path) -> None:
    tree = home / "jobs" / "j" / "algo-1"
    shell = f"ls {home}; ls {home}/jobs; cat {home}/token; touch {tree}/x; touch {home}/y"
    done = run(shell)
    assert done.stdout.split() == ["jobs", "j"]
    assert "token: No such file" in done.stderr and "Read-only file system" in done.stderr
    assert (tree / "x").exists() and not (home / "y").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="capabilities are reduced for a root script")
def test_a_root_script_keeps_docker_s_default_capabilities(run: Runner) -> None:
    done = run("cat /proc/self/status; umount /proc")
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


def test_a_host_of_one_process_has_it_started_by_the_holder(tmp_path: Path) -> None:
    command = ScriptCommand([sys.executable, "train.py"], sys.executable, [])
    launch = _ranks.host_processes(_assignment(), command, {}, tmp_path)
    try:
        argv = list(launch.processes[0].argv)
        assert launch.namespace is not None and launch.spawn is not None and not launch.warnings
        assert argv == [sys.executable, "train.py"] == unwrap(argv)  # no process joins for it
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


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"garbage",
        b"/\0\0one\0two\0echo",  # counts that are not numbers
        b"/\x00\x000\x002\x00echo",  # fewer arguments than it says
        b"/\x00\x000\x001\x00/bin/true\x00NO_EQUALS_SIGN",  # a variable without its value
        b"/\x00\x000\x000",  # no command at all
        b"/\x00\x00-1\x001\x00/bin/true",  # a negative count
        b"/\x00\x005\x001\x00/bin/true",  # more host names than there are words
        b"/\x000\x001\x00/bin/true",  # no cgroup word (an older agent's request)
    ],
)
def test_a_holder_refuses_a_command_it_cannot_read_in_one_line(
    arguments: list[str], request_bytes: bytes
) -> None:
    namespace = HostNamespace.hold(arguments)
    try:
        holder = namespace.holder
        assert holder.stdin is not None and holder.stderr is not None
        with holder.stdin:
            holder.stdin.write(request_bytes)
        assert holder.wait(timeout=60) == 2
        lines = holder.stderr.read().decode().strip().splitlines()
        assert lines == [
            "python -m trainops._hostns_exec: error: "
            "the command on stdin is not one the agent sends"
        ]
    finally:
        namespace.close()


def test_a_masked_directory_looks_inside_as_it_does_outside(tmp_path: Path, home: Path) -> None:
    """The tmpfs over a mask, and the directories made in it, have the mode of what they
    cover: a private home stays private in the job too."""
    home.chmod(0o700)
    (home / "jobs").chmod(0o750)
    hosts = write_hosts_file(tmp_path / "hosts", {"algo-1": "127.9.9.1"})
    tree = home / "jobs" / "j" / "algo-1"
    namespace = HostNamespace.hold(hold_arguments("algo-1", hosts, [], [home], [tree]))
    try:
        done = _run(namespace, f"stat -c '%a %u' {home} {home}/jobs {home}/jobs/j")
    finally:
        namespace.close()
    uid, mode = os.getuid(), oct((home / "jobs" / "j").stat().st_mode & 0o7777)[2:]
    assert done.stdout.split("\n")[:3] == [f"700 {uid}", f"750 {uid}", f"{mode} {uid}"]


def test_a_trainops_inside_a_job_finds_the_masked_socket_parent_private(tmp_path: Path) -> None:
    """A trainops run by a job's script (its own agents) checks the socket parent it sees: the
    mask over the machine's. It was a read-only 0755 tmpfs, and every such agent failed with
    '... is not a private directory of this user'."""
    temp = tmp_path / "tmp"
    sockets = temp / f"trainops-rsh-{os.getuid()}"
    (sockets / "rsh-mine").mkdir(parents=True)
    sockets.chmod(0o700)
    hosts = write_hosts_file(tmp_path / "hosts", {"algo-1": "127.9.9.1"})
    arguments = hold_arguments("algo-1", hosts, [], [sockets], [sockets / "rsh-mine"])
    check = "from trainops.agent.supervision._hostns import socket_parent; print(socket_parent())"
    namespace = HostNamespace.hold(arguments)
    try:
        done = _run(namespace, f"TMPDIR={temp} {sys.executable} -c '{check}'")
    finally:
        namespace.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sockets)


def _cgroup_writable() -> bool:
    probe = ProcessTree("test/probe")
    made = probe.cgroup is not None
    probe.kill_all()
    return made


def _cgroup_of(pid: int) -> str:
    return next(ln[3:] for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                if ln.startswith("0::"))  # fmt: skip


@pytest.mark.parametrize("clone3", [True, False], ids=["forked-into-it", "holder-moved"])
def test_a_held_script_starts_in_its_tree_s_cgroup(
    arguments: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clone3: bool
) -> None:
    """The holder forks the script straight into the tree's cgroup (``clone3`` with
    ``CLONE_INTO_CGROUP``), staying where it is; where the kernel cannot, the holder is moved
    there before it forks. Either way the script starts inside, and the cgroup goes at the
    end."""
    if not _cgroup_writable():
        pytest.skip("no writable cgroup v2 here")
    if clone3 and not _hostns.clone_into_cgroup():
        pytest.skip("this kernel cannot fork into a cgroup (clone3, Linux 5.7)")
    monkeypatch.setattr(_hostns, "_clone_into_cgroup", clone3)
    namespace = HostNamespace.hold(arguments)
    holder_before = _cgroup_of(namespace.holder.pid)
    lines: list[str] = []
    try:
        process = ScriptProcess(
            ["/bin/sh", "-c", "cat /proc/self/cgroup"],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"]},
            on_line=lambda _stream, got, _ts: lines.extend(got),
            marker="test/held-cgroup",
            spawn=namespace.run_held(["algo-1"]),
        )
        process.start()
        holder_during = _cgroup_of(namespace.holder.pid)
        assert process.finish() == 0
    finally:
        namespace.close()
    [seen] = [line[3:] for line in lines if line.startswith("0::")]
    name = seen.rsplit("/", 1)[1]
    assert name.startswith(f"trainops-{os.getpid()}-") and name.endswith("test-held-cgroup")
    assert (holder_during == seen) is not clone3, (holder_before, holder_during, seen)
    parent = _reaper._own_cgroup()  # where the trees' cgroups are made, whatever the mount
    assert parent is not None and parent.is_dir()
    assert not (parent / name).exists()  # removed with the script's end
