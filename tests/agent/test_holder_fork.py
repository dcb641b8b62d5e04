"""The host's namespace holder forked ready (``_holder_fork``): taken by ``HostNamespace.start``,
it makes the same namespaces and runs the host's one process as the started holder does (on
the CPUs its parent pinned itself to after the fork), ends as the script ends, keeps nothing of
its parent's but its pipes, is forked only by a process with one thread where no user namespace
is needed, and one never taken goes quietly.

Each case runs in a fresh interpreter: the fork is only made in a process with a single thread
(which pytest's need not be), and nothing forked may outlive the case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.agent.supervision._hostns import namespaces_available

pytestmark = pytest.mark.skipif(
    not namespaces_available() or os.getuid() != 0,
    reason="the holder is forked only as root, where namespaces are made",
)

PRELUDE = """
import os, signal, sys, threading, time
from pathlib import Path
from trainops.agent.supervision._holder_fork import (
    ForkedHolder, fork_spare_holder, release_spare_holder, take_spare_holder)
from trainops.agent.supervision._hostns import HostNamespace, hold_arguments, write_hosts_file
from trainops.agent.supervision._reaper import ProcessTree

tmp = Path(sys.argv[1])
home = tmp / "home"
(home / "jobs" / "j").mkdir(parents=True)
(home / "token").write_text("secret")
hosts = write_hosts_file(tmp / "hosts", {"algo-1": "127.9.9.1"})
arguments = hold_arguments("algo-1", hosts, [], [home], [home / "jobs" / "j"])
TREE = ProcessTree("holder-fork", use_cgroup=False)

def held(shell, env=None):
    namespace = HostNamespace.start(arguments)
    namespace.ready()
    start = namespace.run_held(["algo-1"])
    process = start(["/bin/sh", "-c", shell], tmp, env or {"PATH": "/usr/bin:/bin"}, TREE)
    out = process.stdout.read().decode()
    code = process.wait()
    namespace.close()
    return type(namespace.holder).__name__, out, code
"""

RUNS_THE_SCRIPT_AS_THE_STARTED_HOLDER = (
    PRELUDE
    + """
assert fork_spare_holder(True)
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the agent pins itself after the fork
shell = 'echo $$; hostname; ls /proc | grep -c "^[0-9]"; ls {home}; echo "$ONLY"; '
shell += "grep Cpus_allowed_list /proc/self/status; exit 7"
kind, out, code = held(shell.format(home=home), {"PATH": "/usr/bin:/bin", "ONLY": "a b=c"})
print(kind, code)
print(out.replace(chr(10), "|"))
kind, out, code = held("exit 3")  # the spare is taken once: the next holder is started
print(kind, code)
"""
)

KEEPS_ONLY_ITS_PIPES = (
    PRELUDE
    + """
extra = os.pipe()  # a descriptor of the parent's that the holder must not hold
assert fork_spare_holder(True)
os.environ["TRAINOPS_AGENT_TOKEN"] = "read after the fork"  # as the launch is
spare = take_spare_holder()
deadline = time.monotonic() + 30  # until it has closed what it does not keep
while len(fds := sorted(int(fd) for fd in os.listdir(f"/proc/{spare.pid}/fd"))) > 4:
    assert time.monotonic() < deadline, fds
    time.sleep(0.01)
links = {os.readlink(f"/proc/{spare.pid}/fd/{fd}") for fd in fds}
theirs = {os.readlink(f"/proc/self/fd/{fd}") for fd in extra}
print(fds[:3] == [0, 1, 2], len(fds) == 4, not theirs & links)
# it ends as its script ended: killed by the same signal
os.close(extra[0]); os.close(extra[1])
namespace = HostNamespace(spare)
spare.begin(["--hold", "--run", "--die-with-parent", str(os.getpid()), *arguments])
start = namespace.run_held(["algo-1"])
process = start(["/bin/sh", "-c", "kill -USR1 $$"], tmp, {"PATH": "/bin"}, TREE)
print(process.wait() == -signal.SIGUSR1)
namespace.close()
"""
)

PEEKS_AT_ITS_INIT = (
    PRELUDE
    + """
assert fork_spare_holder(True)  # this interpreter's environment (as the fork server's) has a key
shell = "for f in environ mem; do head -c 4096 /proc/1/$f > /dev/null && echo read $f; done; "
shell += "grep -a -c S3_KEY_OF_THE_SERVER /proc/1/environ /proc/1/mem; ls /proc/self/fd"
kind, out, code = held(shell)
print(kind, out.replace(chr(10), "|"))
"""
)

UNUSED_OR_NOT_FORKED = (
    PRELUDE
    + """
assert fork_spare_holder(True)
spare = take_spare_holder()
release_spare_holder()  # none held any more: nothing happens
spare.release()  # its arguments end empty: it exits at once
print(spare.returncode)
print(fork_spare_holder(False), take_spare_holder())  # no namespaces on this machine: none
threading.Thread(target=threading.Event().wait, args=(2,), daemon=True).start()
print(fork_spare_holder(True), take_spare_holder())  # a process with threads forks none
"""
)


def _run(script: str, tmp_path: Path, env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_forked_holder_runs_the_script_as_the_started_one(tmp_path: Path) -> None:
    first, out, second = _run(RUNS_THE_SCRIPT_AS_THE_STARTED_HOLDER, tmp_path)
    assert first == "ForkedHolder 7"
    pid, hostname, count, home, only, cpus = out.split("|")[:6]
    assert int(pid) > 1 and hostname == "algo-1" and int(count) < 10
    assert home == "jobs"  # the home is masked but for the tree: the token is not there
    assert only == "a b=c"
    assert cpus.split() == ["Cpus_allowed_list:", str(min(os.sched_getaffinity(0)))]
    assert second == "Popen 3"


def test_the_forked_holder_keeps_only_its_pipes(tmp_path: Path) -> None:
    fds, signalled = _run(KEEPS_ONLY_ITS_PIPES, tmp_path)
    assert fds == "True True True"
    assert signalled == "True"


def test_an_unused_holder_goes_and_none_is_forked_where_it_must_not_be(tmp_path: Path) -> None:
    released, without_namespaces, threaded = _run(UNUSED_OR_NOT_FORKED, tmp_path)
    assert released == "0"
    assert without_namespaces == "False None"
    assert threaded == "False None"


def test_a_hostile_script_cannot_read_its_init_a_copy_of_the_fork_server(tmp_path: Path) -> None:
    secret = {**os.environ, "AWS_SECRET_ACCESS_KEY": "S3_KEY_OF_THE_SERVER"}
    [line] = _run(PEEKS_AT_ITS_INIT, tmp_path, secret)
    kind, out = line.split(" ", 1)
    assert kind == "ForkedHolder"
    assert "read" not in out  # neither /proc/1/environ nor /proc/1/mem opens (not dumpable)
    assert "S3_KEY_OF_THE_SERVER" not in out
    # stdin, stdout, stderr and ls's own listing: nothing of the holder's or the fork server's
    assert out == "0|1|2|3|"
