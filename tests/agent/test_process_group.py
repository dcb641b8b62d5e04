"""A host's ranks run as one group: tagged output, fail fast, stop reaching every rank."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests._support.system import require, require_extra
from tests.agent._support import make_hosts, make_job, run_together
from trainops._hostns_exec import NAME_UNRESOLVED
from trainops.agent import HostResult
from trainops.agent._ranks import rendezvous_scope
from trainops.agent.launchers import job_port
from trainops.agent.supervision._hostns import host_addresses, namespaces_available, wrap
from trainops.protocol import Command, EventKind, HostOutcome

PRINT_RANK = """
import json, os
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR"]
print(json.dumps({k: os.environ[k] for k in keys}), flush=True)
"""

RANK_ONE_FAILS = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
ready = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank0-ready")
if rank == 1:
    # Fail only once rank 0 listens for SIGTERM (as in TERM_ONCE): a loaded machine may start
    # rank 0's interpreter later than rank 1's, and the default action would end it silently.
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(3)
def on_term(signum, frame):
    print(f"rank {rank} got SIGTERM", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
open(ready, "w").close()
while True:
    time.sleep(0.05)
"""

WAITS_FOR_STOP = """
import os, signal, sys, time
rank = os.environ["RANK"]
def on_term(signum, frame):
    print(f"rank {rank} stopping", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print(f"rank {rank} ready", flush=True)
while True:
    time.sleep(0.05)
"""

ALLREDUCE = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"sum={t.item():g} rank={dist.get_rank()} world={dist.get_world_size()}", flush=True)
dist.barrier()  # leave together: gloo aborts a rank whose peers are gone
dist.destroy_process_group()
"""


def test_each_rank_gets_its_rendezvous_environment_and_its_tag(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": PRINT_RANK},
        hosts=["algo-1", "algo-2"],
        host="algo-2",
        instance_count=2,
        distribution={"processes_per_host": 2},
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    seen = {int(e["rank"]): json.loads(e["lines"][0]) for e in job.reporter.of(EventKind.LOG)
            if "rank" in e}  # fmt: skip
    assert sorted(seen) == [2, 3]
    for rank, env in seen.items():
        assert env["RANK"] == str(rank) and env["LOCAL_RANK"] == str(rank - 2)
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["NODE_RANK"]) == ("4", "2", "1")
    assert sorted(p["rank"] for p in job.reporter.of(EventKind.PROCESS)) == [2, 3]
    host_log = (job.state_dir / "host.log").read_text()
    assert '[rank 2] {"RANK": "2"' in host_log and '[rank 3] {"RANK": "3"' in host_log


def test_the_first_failing_rank_brings_the_host_down(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": RANK_ONE_FAILS}, distribution={"processes_per_host": 2})
    result = job.run()
    assert (result.outcome, result.exit_code) == (HostOutcome.FAILED, 3)
    assert result.failure_reason is not None
    assert result.failure_reason.startswith("rank 1 on algo-1: ")
    assert "rank 0 got SIGTERM" in job.reporter.lines("stdout")


def test_a_stop_reaches_every_rank(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": WAITS_FOR_STOP}, distribution={"processes_per_host": 2})
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    job.reporter.wait_for_line("rank 0 ready")
    job.reporter.wait_for_line("rank 1 ready")
    job.reporter.push(Command("stop", reason="user asked", grace_seconds=5))
    runner.join()
    assert results[0].outcome is HostOutcome.STOPPED
    assert {"rank 0 stopping", "rank 1 stopping"} <= set(job.reporter.lines("stdout"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "distribution",
    [
        {"processes_per_host": 2},
        {"torch_distributed": {"enabled": True}, "processes_per_host": 2},
    ],
    ids=["plain", "torchrun"],
)
def test_ranks_form_a_gloo_world(tmp_path: Path, distribution: dict[str, object]) -> None:
    require_extra("torch")
    job = make_job(tmp_path, {"train.py": ALLREDUCE}, distribution=distribution)
    result = job.run()
    assert result.outcome is HostOutcome.COMPLETED, result.failure_reason
    sums = {
        (e["rank"], line)
        for e in job.reporter.of(EventKind.LOG)
        for line in e.get("lines", [])
        if "sum=" in line
    }
    assert sums == {(0, "sum=3 rank=0 world=2"), (1, "sum=3 rank=1 world=2")}


BINDS_THE_MASTER_PORT = """
import os, socket
if os.environ["RANK"] == "0":
    s = socket.socket()
    s.bind((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
    s.listen()
    print(f"bound {os.environ['MASTER_PORT']}", flush=True)
"""


def test_a_one_host_job_whose_port_is_held_gets_a_free_one(tmp_path: Path) -> None:
    """Another program (a job of the same name under another home: another test run, say)
    listens on the job's rendezvous port at its master's address: the job is not failed
    with EADDRINUSE, its ranks are given a port they can bind."""
    job = make_job(tmp_path, {"train.py": BINDS_THE_MASTER_PORT},
                   distribution={"processes_per_host": 2})  # fmt: skip
    scope = rendezvous_scope(job.assignment)
    derived = job_port("job-1", 1, scope)
    address = host_addresses("job-1", 1, ["algo-1"], scope)["algo-1"]
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAITs
        holder.bind((address if namespaces_available() else "127.0.0.1", derived))
        holder.listen()
        result = job.run()
    assert result.outcome is HostOutcome.COMPLETED, result.failure_reason
    [line] = job.reporter.lines("stdout")
    assert line.startswith("bound ") and line != f"bound {derived}"


def test_same_named_jobs_of_two_homes_do_not_share_hosts_or_a_rendezvous(tmp_path: Path) -> None:
    """Two jobs named alike under two trainops homes on one machine (two users, or a test run
    beside a server) would get the same loopback addresses and rendezvous port from the name
    alone, and a rank of one could join the other's group: their scope tells them apart,
    while every host of one job still derives the same (from the same assignment)."""
    one = make_hosts(tmp_path / "home-a", {"train.py": ""}, 2)
    other = make_hosts(tmp_path / "home-b", {"train.py": ""}, 2)
    scopes = {rendezvous_scope(job.assignment) for job in one}
    assert len(scopes) == 1  # the hosts of a job agree
    [scope] = scopes
    [other_scope] = {rendezvous_scope(job.assignment) for job in other}
    assert scope != other_scope
    hosts = ["algo-1", "algo-2"]
    assert host_addresses("job-1", 1, hosts, scope) != host_addresses(
        "job-1", 1, hosts, other_scope
    )
    ports = {job_port("job-1", 1, s) for s in (scope, other_scope)}
    assert len(ports) == 2
    assert job_port("job-1", 2, scope) != job_port("job-1", 1, scope)  # a retry: another port


BINDS_ITS_HOST = """
import socket, time
me = socket.gethostname()
s = socket.socket()
s.bind((me, 29999))
s.listen()
print(f"{me} {socket.gethostbyname('algo-1')} {socket.gethostbyname('algo-2')} bound", flush=True)
time.sleep(1.0)
"""


def test_host_names_resolve_and_two_hosts_bind_one_port(tmp_path: Path) -> None:
    if not namespaces_available():
        pytest.skip("this machine allows no mount/UTS namespaces")
    jobs = make_hosts(tmp_path, {"train.py": BINDS_ITS_HOST})
    results = run_together(jobs)
    assert [r.outcome for r in results] == [HostOutcome.COMPLETED] * 2, results
    [one], [two] = (j.reporter.lines("stdout") for j in jobs)
    name1, a1, a2, _ = one.split()
    name2, b1, b2, _ = two.split()
    assert (name1, name2) == ("algo-1", "algo-2")
    assert a1 == b1 != a2 == b2 and a1.startswith("127.") and a1 != "127.0.0.1"
    assert "algo-1" not in Path("/etc/hosts").read_text()  # the machine's file is untouched


def test_a_host_name_that_never_resolves_fails_the_host_clearly(tmp_path: Path) -> None:
    if not namespaces_available():
        pytest.skip("this machine allows no mount/UTS namespaces")
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("127.0.0.1 localhost\n")
    argv = wrap([sys.executable, "-c", "print('never')"], "algo-1", hosts_file, ["algo-9"])
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ,
                          "TRAINOPS_RESOLVE_SECONDS": "0.2"}, check=False)  # fmt: skip
    assert done.returncode == NAME_UNRESOLVED
    assert "host name 'algo-9' did not resolve" in done.stderr and "never" not in done.stdout


MPI_ALLREDUCE = """
import sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(f"rank {comm.Get_rank()} of {comm.Get_size()} sum={total}", flush=True)
if "--fail" in sys.argv and comm.Get_rank() == 1:
    raise SystemExit("rank 1 gives up")
comm.Barrier()
"""


def _needs_mpi() -> None:
    require("mpirun")
    require_extra("mpi")


@pytest.mark.slow
def test_mpirun_starts_the_ranks_and_tags_them(tmp_path: Path) -> None:
    _needs_mpi()
    distribution = {"mpi": {"enabled": True, "processes_per_host": 2}}
    job = make_job(tmp_path, {"train.py": MPI_ALLREDUCE}, distribution=distribution)
    result = job.run()
    assert result.outcome is HostOutcome.COMPLETED, result.failure_reason
    tagged = {
        (e.get("rank"), line)
        for e in job.reporter.of(EventKind.LOG)
        for line in e.get("lines", [])
        if "sum=" in line
    }
    assert tagged == {(0, "rank 0 of 2 sum=3"), (1, "rank 1 of 2 sum=3")}
    [process] = job.reporter.of(EventKind.PROCESS)
    assert any(part.endswith("mpirun") for part in process["command"])
    assert "mpi4py" in process["command"]


@pytest.mark.slow
def test_a_failing_mpi_rank_fails_the_host(tmp_path: Path) -> None:
    _needs_mpi()
    distribution = {"mpi": {"enabled": True, "processes_per_host": 2}}
    job = make_job(
        tmp_path,
        {"train.py": MPI_ALLREDUCE},
        distribution=distribution,
        hyperparameters={"fail": "yes"},
    )
    result = job.run()
    assert result.outcome is HostOutcome.FAILED
    assert "rank 1 gives up" in " ".join(job.reporter.lines("stderr"))


def test_launcher_tags_become_ranks_and_streams() -> None:
    from trainops.agent.supervision._group import TagParser
    from trainops.agent.supervision._rank_report import TAG_STYLES

    torchrun = ["[default0]:a", "[default0]:b", "[default1]:c", "launcher says hi"]
    assert TagParser(TAG_STYLES["torchrun"].pattern, 4).feed(torchrun, "stdout") == [
        (4, "stdout", ["a", "b"]),
        (5, "stdout", ["c"]),
        (None, "stdout", ["launcher says hi"]),
    ]
    # torch's excepthook writes "[rank5]: " before the traceback of global rank 5 (local 1):
    # the rank's own text, never a second tag
    traceback = ["[default1]:[rank5]: Traceback (most recent call last):", "[rank9]: not a tag"]
    assert TagParser(TAG_STYLES["torchrun"].pattern, 4, 2).feed(traceback, "stderr") == [
        (5, "stderr", ["[rank5]: Traceback (most recent call last):"]),
        (None, "stderr", ["[rank9]: not a tag"]),
    ]
    # a rank's own text that looks like a header of a rank this host does not run stays text
    hostile = ["[default1]:x [default7]: y [default99999999999999]: z", "[default0]:[default2]:"]
    assert TagParser(TAG_STYLES["torchrun"].pattern, 4, 2).feed(hostile, "stdout") == [
        (5, "stdout", ["x [default7]: y [default99999999999999]: z"]),
        (4, "stdout", ["[default2]:"]),
    ]
    # mpirun: pieces of two ranks on one line, rank 0's newline on a line of its own
    parser = TagParser(TAG_STYLES["mpirun"].pattern, 0)
    first = ["[1,0]<stdout>:x is[1,1]<stdout>:y", "[1,1]<stderr>:oops", "[1,1]<stdout>:[z]"]
    assert parser.feed(first, "stdout") == [
        (1, "stdout", ["y"]),
        (1, "stderr", ["oops"]),
        (1, "stdout", ["[z]"]),
    ]
    assert parser.feed(["[1,0]<stdout>: whole"], "stdout") == [(0, "stdout", ["x is whole"])]


def test_a_rank_that_never_ends_its_line_is_not_held_without_bound() -> None:
    from trainops.agent.supervision._group import MAX_HELD_CHARS, TagParser
    from trainops.agent.supervision._rank_report import TAG_STYLES

    parser = TagParser(TAG_STYLES["mpirun"].pattern, 0)
    piece = "x" * 4096
    passed = []
    for _ in range(MAX_HELD_CHARS // len(piece) + 2):
        passed += parser.feed([f"[1,0]<stdout>:{piece}[1,1]<stdout>:y"], "stdout")
    held_back = [run for run in passed if run[0] == 0]
    assert held_back and len(held_back[0][2][0]) >= MAX_HELD_CHARS


TERM_ONCE = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
ready = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank0-ready")
if rank == 1:
    # Fail only once rank 0 listens for SIGTERM: a loaded machine may start rank 0's
    # interpreter later than rank 1's, and the default action would end it without a line.
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(3)
seen = []
def on_term(signum, frame):
    seen.append(signum)
    print(f"rank {rank} SIGTERM number {len(seen)}", flush=True)
    if len(seen) == 1:
        time.sleep(1.0)  # a second SIGTERM would arrive in here
        sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
open(ready, "w").close()
while True:
    time.sleep(0.05)
"""


def test_a_rank_is_sent_sigterm_once(tmp_path: Path) -> None:
    # The agent signals the rank's process group and then the rest of the job's process tree:
    # the group's members must not get the signal a second time.
    job = make_job(tmp_path, {"train.py": TERM_ONCE}, distribution={"processes_per_host": 2})
    result = job.run()
    assert result.exit_code == 3
    assert [ln for ln in job.reporter.lines("stdout") if "SIGTERM" in ln] == [
        "rank 0 SIGTERM number 1"
    ]


# Rank 1 fails; rank 0 ignores the group's SIGTERM (the host is slow to end) while the control
# plane's stop arrives, sent because another host of the job ended first.
RANK_ONE_FAILS_THEN_THE_HOST_LINGERS = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
ready = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank0-ready")
if rank == 1:
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    print("RuntimeError: rank 1 ran out of data", file=sys.stderr, flush=True)
    sys.exit(3)
def on_term(signum, frame):
    print(f"rank {rank} got SIGTERM, finishing slowly", flush=True)
signal.signal(signal.SIGTERM, on_term)
open(ready, "w").close()
while True:
    time.sleep(0.05)
"""


def test_a_host_whose_rank_failed_before_the_stop_came_ends_failed_with_the_time(
    tmp_path: Path,
) -> None:
    job = make_job(
        tmp_path,
        {"train.py": RANK_ONE_FAILS_THEN_THE_HOST_LINGERS},
        distribution={"processes_per_host": 2},
    )
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    job.reporter.wait_for_line("rank 0 got SIGTERM")  # the group saw rank 1 fail
    stopped_at = time.time()
    job.reporter.push(Command("stop", reason="The job has failed", grace_seconds=0.5))
    runner.join(120)
    [result] = results
    assert (result.outcome, result.exit_code) == (HostOutcome.FAILED, 3)
    assert result.failure_reason is not None and result.failure_reason.startswith("rank 1 on ")
    [exit_event] = job.reporter.of(EventKind.EXIT)
    assert exit_event["outcome"] == "Failed" and exit_event["failed_at"] < stopped_at
