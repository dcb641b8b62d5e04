"""The backend contract, run against every implementation in ``BACKENDS``.

Agents here are tiny real Python programs (the agent's behaviour is not the point): they record
their environment, optionally start a workload in its own session, and sleep.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests._support.ray_cluster import RayCluster
from trainops._containment import Containment, containment
from trainops._settings import LocalCapacity, Settings
from trainops.backends import (
    BACKENDS,
    JOURNAL_FILE,
    AgentHandle,
    Backend,
    CapacityShortage,
    HostPlacement,
    parse_journal,
)
from trainops.backends._local import LocalBackend, agent_process
from trainops.backends._ray import RayBackend
from trainops.catalog import get_instance_type
from trainops.protocol import AgentEvent, AgentLaunch, EventKind, HostResources

SLEEPER = """
import json, os, subprocess, sys, time
state = os.environ["TRAINOPS_AGENT_STATE"]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
record = {"env": dict(os.environ), "sid": os.getsid(0), "child": child.pid}
with open(os.path.join(state, "record.json.tmp"), "w") as out:
    json.dump(record, out)
os.replace(os.path.join(state, "record.json.tmp"), os.path.join(state, "record.json"))
print("agent output", flush=True)
time.sleep(120)
"""

RECORDING = """
import os, time
from pathlib import Path
from trainops.protocol import record_agent_process
record_agent_process(Path(os.environ["TRAINOPS_AGENT_STATE"]))
time.sleep(120)
"""

SMALL = LocalCapacity(cpus=4, memory_mb=8192, gpus=0)
LARGE = get_instance_type("ml.m5.large")  # 2 vCPUs, 8 GiB


@dataclass
class Recipe:
    """How to build a backend of one kind, with room for exactly two ml.m5.large hosts."""

    kind: str
    settings: Callable[[Path], Settings]

    def make(self, home: Path, agent_command: list[str] | None = None) -> Backend:
        return BACKENDS[self.kind](self.settings(home), agent_command=agent_command)


@pytest.fixture(params=BACKENDS.names())
def recipe(request: pytest.FixtureRequest) -> Recipe:
    if request.param == "local":
        return Recipe("local", lambda home: _settings(home))
    if request.param == "ray":
        cluster = request.getfixturevalue("ray_cluster")  # two worker nodes of 2 CPUs each
        return Recipe("ray", lambda home: cluster.settings(home))
    raise AssertionError(f"no recipe for the {request.param} backend")


def _settings(home: Path, capacity: LocalCapacity = SMALL) -> Settings:
    return Settings(home=home, capacity=capacity, token="public-token")


def _launch(tmp_path: Path, host: str = "algo-1", job: str = "job-a") -> AgentLaunch:
    base = tmp_path / "jobs" / job / "attempt-1"
    return AgentLaunch(
        server_url="http://127.0.0.1:9",
        token="agent-token",
        job_name=job,
        host=host,
        attempt=1,
        root=base / host,
        state_dir=base / ".agents" / host,
    )


def _wait_for_file(path: Path, timeout: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    data: dict[str, object] = json.loads(path.read_text())
    return data


def _start(
    recipe: Recipe, home: Path, program: str, job: str = "job-a", env: dict[str, str] | None = None
) -> tuple[Backend, AgentHandle, AgentLaunch]:
    backend = recipe.make(home, [sys.executable, "-c", program])
    backend.reserve(job, LARGE, 1)
    launch = _launch(home, job=job)
    handle = backend.launch(launch, HostResources(cpus=[0]), env or {})
    return backend, handle, launch


@pytest.fixture
def started(
    recipe: Recipe, trainops_home: Path
) -> Iterator[tuple[Backend, AgentHandle, AgentLaunch]]:
    backend, handle, launch = _start(recipe, trainops_home, SLEEPER, env={"EXTRA_VAR": "extra"})
    yield backend, handle, launch
    backend.kill(handle)
    backend.release(launch.job_name)


def test_machine_capacity_is_positive(recipe: Recipe, trainops_home: Path) -> None:
    capacity = recipe.make(trainops_home).capacity()
    assert capacity.cpus >= 1 and capacity.memory_mb > 0 and capacity.gpus >= 0


def test_where_agents_run_is_asked_what_a_job_cannot_have_there(
    recipe: Recipe, trainops_home: Path
) -> None:
    # Every node here is this machine, which the suite's own probe asks: the same answer.
    backend = recipe.make(trainops_home)
    for mount_opt_ml in (True, False):
        expected = containment().note(mount_opt_ml)
        note = backend.containment_note(mount_opt_ml)
        if expected is None:
            assert note is None
        else:
            assert note is not None and note.endswith(expected) and "\n" not in note


def test_ray_names_the_nodes_that_cannot_contain_a_job(
    ray_cluster: RayCluster, trainops_home: Path
) -> None:
    backend = Recipe("ray", lambda home: ray_cluster.settings(home)).make(trainops_home)
    assert isinstance(backend, RayBackend)
    assert backend.containment_note(True) is None  # each node asked: they all allow namespaces
    asked = sorted(backend._containment)
    assert len(asked) >= 2
    refused = Containment(False, False, "[Errno 1] unshare: Operation not permitted")
    backend._containment[asked[0]] = refused  # what such a node answered (it is asked once)
    note = backend.containment_note(True)
    assert note is not None and note.startswith(f"on 1 of {len(asked)} Ray nodes (")
    assert note.endswith(f"): {refused.note(True)}")


def test_a_job_needs_all_its_hosts_at_once(recipe: Recipe, trainops_home: Path) -> None:
    backend = recipe.make(trainops_home)
    try:
        first = backend.reserve("first", LARGE, 1)
        assert len(first) == 1
        with pytest.raises(CapacityShortage, match=r"2 hosts|2 CPUs per host x 2 hosts"):
            backend.reserve("second", LARGE, 2)
        backend.release("first")
        assert len(_reserve_soon(backend, "second", 2)) == 2
    finally:
        backend.release("first")
        backend.release("second")


def test_reservations_are_adopted_after_a_restart(recipe: Recipe, trainops_home: Path) -> None:
    before = recipe.make(trainops_home)
    try:
        held = before.reserve("held", LARGE, 1)
        after = recipe.make(trainops_home)
        after.adopt("held", [p.reservation for p in held])
        with pytest.raises(CapacityShortage):
            after.reserve("next", LARGE, 2)
        after.release("held")
        after.release("next")
        assert len(_reserve_soon(after, "next", 2)) == 2
        after.release("next")
    finally:
        before.release("held")
        before.release("next")


def _reserve_soon(backend: Backend, job: str, count: int) -> list[HostPlacement]:
    """A reservation that must succeed (an engine may take a moment to free what was released)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return backend.reserve(job, LARGE, count)
        except CapacityShortage:
            assert time.monotonic() < deadline, f"{job} never fitted"
            time.sleep(0.1)


@pytest.mark.slow
def test_an_agent_runs_in_its_own_session_with_the_launch_environment(
    started: tuple[Backend, AgentHandle, AgentLaunch], trainops_home: Path
) -> None:
    backend, handle, launch = started
    record = _wait_for_file(launch.state_dir / "record.json")
    env = record["env"]
    assert isinstance(env, dict)
    assert {k: env[k] for k in launch.env()} == launch.env()
    assert env["TRAINOPS_HOME"] == str(trainops_home)
    assert env["EXTRA_VAR"] == "extra"
    assert "TRAINOPS_TOKEN" not in env
    assert record["sid"] != os.getsid(0)  # a session of its own
    assert backend.is_alive(handle)
    deadline = time.monotonic() + 30
    while "agent output" not in backend.agent_output(launch.state_dir):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert backend.agent_output(launch.state_dir, max_chars=7) == "output"  # "output\n"
    assert backend.agent_output(launch.state_dir.parent / "none") == ""


@pytest.mark.slow
def test_the_handle_survives_the_store_and_names_only_its_agent(
    started: tuple[Backend, AgentHandle, AgentLaunch],
) -> None:
    backend, handle, _launch = started
    # What a restarted control plane has: the handle as JSON, back from the store.
    stored = AgentHandle(json.loads(json.dumps(handle.to_json())))
    assert backend.is_alive(stored)
    assert not backend.is_alive(AgentHandle())  # an empty handle names no agent
    if isinstance(backend, LocalBackend):  # a reused pid is not the agent
        pid, created = agent_process(handle)
        assert pid is not None and created is not None
        assert not backend.is_alive(AgentHandle({"pid": pid, "create_time": created - 100}))


@pytest.mark.slow
def test_an_agent_whose_launch_went_unrecorded_is_found_from_its_state_directory(
    recipe: Recipe, trainops_home: Path
) -> None:
    # A control plane SIGKILLed between launching an agent and storing its handle: the next one
    # (a backend made afresh) has only the host's state directory to go on.
    backend, handle, launch = _start(recipe, trainops_home, RECORDING)
    try:
        after = recipe.make(trainops_home, [sys.executable, "-c", RECORDING])
        deadline = time.monotonic() + 60
        while (found := after.find_agent(launch.state_dir)) is None:
            assert time.monotonic() < deadline, "the agent was never found"
            time.sleep(0.05)
        assert found.to_json() == handle.to_json()
        assert after.is_alive(found)
        assert after.find_agent(launch.state_dir.with_name("algo-9")) is None
        after.kill(found)
        assert not backend.is_alive(handle)
    finally:
        backend.kill(handle)
        backend.release(launch.job_name)


@pytest.mark.slow
def test_signal_reaches_the_agent(started: tuple[Backend, AgentHandle, AgentLaunch]) -> None:
    backend, handle, launch = started
    _wait_for_file(launch.state_dir / "record.json")
    backend.signal(handle, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while backend.is_alive(handle):
        assert time.monotonic() < deadline, "SIGTERM did not end the agent"
        time.sleep(0.02)


@pytest.mark.slow
def test_kill_ends_the_agent_and_its_reported_workloads(
    started: tuple[Backend, AgentHandle, AgentLaunch],
) -> None:
    backend, handle, launch = started
    record = _wait_for_file(launch.state_dir / "record.json")
    child = int(str(record["child"]))
    ref = backend.workload_ref(child, os.getpgid(child))
    assert ref is not None
    backend.kill(AgentHandle(handle.data, (ref,)))
    assert not backend.is_alive(handle)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    if isinstance(backend, LocalBackend):  # a process of another machine is the engine's to find
        assert backend.workload_ref(2**22 + 7, 1) is None


def test_a_missing_agent_program_fails_the_launch(recipe: Recipe, trainops_home: Path) -> None:
    backend = recipe.make(trainops_home, [str(trainops_home / "no-agent")])
    backend.reserve("job-a", LARGE, 1)
    try:
        with pytest.raises(OSError):
            backend.launch(_launch(trainops_home), HostResources(), {})
    finally:
        backend.release("job-a")


JOURNALER = """
import json, os
state = os.environ["TRAINOPS_AGENT_STATE"]
events = [
    {"seq": 1, "ts": 1.0, "kind": "log", "data": {"stream": "stdout", "line": "a"}},
    {"seq": 2, "ts": 2.0, "kind": "exit", "data": {"outcome": "Completed", "exit_code": 0}},
]
with open(os.path.join(state, "journal.jsonl"), "w") as out:
    out.write("".join(json.dumps(e) + "\\n" for e in events) + '{"seq": 3, "ts": 3.0, "ki')
print("journal written", flush=True)
"""


@pytest.mark.slow
def test_the_journal_is_read_back_without_its_torn_last_line(
    recipe: Recipe, trainops_home: Path
) -> None:
    # What a restarted control plane reads of an agent that ended while it was down, from the
    # machine the agent ran on.
    backend, handle, launch = _start(recipe, trainops_home, JOURNALER)
    try:
        deadline = time.monotonic() + 60
        while backend.is_alive(handle):
            assert time.monotonic() < deadline, "the agent never ended"
            time.sleep(0.05)
        assert backend.read_journal(launch.state_dir) == [
            AgentEvent(1, 1.0, EventKind.LOG, {"stream": "stdout", "line": "a"}),
            AgentEvent(2, 2.0, EventKind.EXIT, {"outcome": "Completed", "exit_code": 0}),
        ]
        assert backend.agent_output(launch.state_dir) == "journal written"
        assert backend.read_journal(launch.state_dir.parent / "algo-9") == []
    finally:
        backend.kill(handle)
        backend.release(launch.job_name)


def test_a_journal_is_parsed_without_its_torn_last_line() -> None:
    events = [
        AgentEvent(1, 1.0, EventKind.LOG, {"stream": "stdout", "line": "a"}),
        AgentEvent(2, 2.0, EventKind.EXIT, {"outcome": "Completed", "exit_code": 0}),
    ]
    text = "".join(json.dumps(e.to_json()) + "\n" for e in events) + '{"seq": 3, "ts": 3.0, "ki'
    assert parse_journal(text) == events


@pytest.mark.slow
def test_a_launch_starts_from_a_fresh_state_directory(recipe: Recipe, trainops_home: Path) -> None:
    # What a launch cut short by a crash left behind must not reach the next agent of the host.
    launch = _launch(trainops_home)
    launch.state_dir.mkdir(parents=True)
    (launch.state_dir / JOURNAL_FILE).write_text('{"seq": 1, "stale": true}\n')
    backend, handle, launch = _start(recipe, trainops_home, SLEEPER)
    try:
        _wait_for_file(launch.state_dir / "record.json")
        assert backend.read_journal(launch.state_dir) == []
        assert backend.job_trees() == ["job-a"]
    finally:
        backend.kill(handle)
        backend.release(launch.job_name)
    assert backend.remove_job_tree("job-a") and backend.job_trees() == []
    assert backend.remove_job_tree("never-was")  # nothing there: nothing left


# The local backend's own rules: capacity from settings or the machine, CPU ids handed out.


def test_local_capacity_comes_from_settings(trainops_home: Path) -> None:
    capacity = LocalBackend(_settings(trainops_home)).capacity()
    assert (capacity.cpus, capacity.memory_mb, capacity.gpus) == (4, 8192, 0)


def test_local_hosts_get_cpu_ids_and_a_share_of_the_memory(trainops_home: Path) -> None:
    backend = LocalBackend(_settings(trainops_home))
    first = backend.reserve("first", LARGE, 1)
    assert first[0].resources.memory_mb == 8192 and len(first[0].resources.cpus) == 2
    with pytest.raises(CapacityShortage, match=r"needs 2 CPUs per host x 2 hosts; 2 free"):
        backend.reserve("second", LARGE, 2)
    assert backend.free().cpus == 2
    backend.release("first")
    second = backend.reserve("second", LARGE, 2)
    assert [len(p.resources.cpus) for p in second] == [2, 2]
    assert [p.resources.memory_mb for p in second] == [4096, 4096]


def test_lowest_free_cpus_are_taken_first(trainops_home: Path) -> None:
    backend = LocalBackend(
        _settings(trainops_home, LocalCapacity(cpus=4, memory_mb=64_000, gpus=0))
    )
    a = backend.reserve("a", LARGE, 1)[0].reservation
    b = backend.reserve("b", LARGE, 1)[0].reservation
    assert (a["cpus"], b["cpus"]) == ([0, 1], [2, 3])
    backend.release("a")
    assert backend.reserve("c", LARGE, 1)[0].reservation["cpus"] == [0, 1]


def test_a_job_always_fits_an_idle_machine(trainops_home: Path) -> None:
    backend = LocalBackend(_settings(trainops_home, LocalCapacity(cpus=2, memory_mb=1000, gpus=1)))
    big = get_instance_type("ml.p3.8xlarge")  # 32 vCPUs, 4 GPUs
    hosts = backend.reserve("big", big, 3)
    assert [p.reservation["cpus"] for p in hosts] == [[0], [1], [0]]
    assert [p.reservation["gpus"] for p in hosts] == [[0], [0], [0]]
    assert {p.resources.memory_mb for p in hosts} == {333}
    with pytest.raises(CapacityShortage, match="needs all 2 CPUs"):
        backend.reserve("next", big, 3)
