"""Every launcher passes the same suite: what it starts covers the host's ranks with the full
rendezvous environment on top of the SageMaker contract, and nothing else is changed."""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from trainops.agent.launchers import (
    LAUNCHERS,
    LaunchContext,
    RankProcess,
    available_launchers,
    launcher_for,
)
from trainops.spec import JobSpec

HOSTS = ("algo-1", "algo-2")
PER_HOST = 2
CONTRACT = {"SM_CURRENT_HOST": "algo-2", "SM_HOSTS": '["algo-1","algo-2"]', "PATH": "/usr/bin"}
RANK_VARIABLES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"}


def _context(launcher: str) -> LaunchContext:
    switch = {
        "plain": {},
        "pytorchddp": {"pytorchddp": {"enabled": True}},
        "smdistributed.dataparallel": {"smdistributed": {"dataparallel": {"enabled": True}}},
        "torch_distributed": {"torch_distributed": {"enabled": True}},
        "multi_worker_mirrored_strategy": {"multi_worker_mirrored_strategy": {"enabled": True}},
        "parameter_server": {"parameter_server": {"enabled": True}},
    }[launcher]
    job = JobSpec(
        entry_point="train.py",
        instance_count=len(HOSTS),
        distribution={**switch, "processes_per_host": _per_host(launcher)},
    ).view()
    assert job.distribution.launcher == launcher
    return LaunchContext(
        job=job,
        job_name="job-1",
        attempt=1,
        hosts=HOSTS,
        current_host="algo-2",
        command=("/venv/bin/python", "train.py", "--lr", "0.1"),
        python="/venv/bin/python",
        entry_point="train.py",
        script_args=("--lr", "0.1"),
        env=dict(CONTRACT),
        master_addr="algo-1",
        master_port=23456,
    )


class Launched(NamedTuple):
    name: str
    processes: list[RankProcess]


def _per_host(launcher: str) -> int:
    return 1 if launcher == "parameter_server" else PER_HOST  # one script per host there


@pytest.fixture(params=sorted(LAUNCHERS))
def launched(request: pytest.FixtureRequest) -> Launched:
    name = str(request.param)
    return Launched(name, launcher_for(name).processes(_context(name)))


def test_argv_is_a_list_of_plain_arguments(launched: Launched) -> None:
    processes = launched.processes
    assert processes
    for process in (p for p in processes if not p.auxiliary):
        assert process.argv and all(isinstance(a, str) and a for a in process.argv)
        assert "train.py" in process.argv and process.argv[-2:] == ("--lr", "0.1")
        assert not {"-c", "sh", "/bin/sh"} & set(process.argv[:2])  # never a shell string


def test_the_contract_reaches_every_process_unchanged(launched: Launched) -> None:
    processes = launched.processes
    for process in processes:
        assert {k: process.env[k] for k in CONTRACT} == CONTRACT


def test_every_process_agrees_on_the_master(launched: Launched) -> None:
    for process in (p for p in launched.processes if not p.auxiliary):
        assert (process.env["MASTER_ADDR"], process.env["MASTER_PORT"]) == ("algo-1", "23456")


def test_the_hosts_ranks_are_covered_once(launched: Launched) -> None:
    name, processes = launched
    per_host = _per_host(name)
    ranked = [p for p in processes if p.rank is not None]
    if ranked:  # the launcher starts the ranks itself
        # algo-2 holds the second half of the ranks
        assert [p.rank for p in ranked] == list(range(per_host, 2 * per_host))
        for p in ranked:
            assert set(p.env) >= RANK_VARIABLES
            assert p.env["RANK"] == str(p.rank) and p.env["LOCAL_RANK"] == str(p.local_rank)
            assert p.env["WORLD_SIZE"] == str(2 * per_host)
            assert p.env["LOCAL_WORLD_SIZE"] == str(per_host)
            assert (p.env["GROUP_RANK"], p.env["NODE_RANK"]) == ("1", "1")
    else:  # one process per host that starts the ranks (torchrun, mpirun)
        [process] = processes
        argv = list(process.argv)
        assert argv[argv.index("--nproc_per_node") + 1] == str(PER_HOST), name
        assert argv[argv.index("--node_rank") + 1] == "1"
        assert argv[argv.index("--nnodes") + 1] == "2"


def test_auxiliary_processes_are_released_after_a_job_address(launched: Launched) -> None:
    for process in launched.processes:
        if process.auxiliary:
            assert process.rank is None and process.release_after is not None
            assert process.release_after[0] in HOSTS


@pytest.mark.parametrize("name", ["multi_worker_mirrored_strategy", "parameter_server"])
def test_tf_config_names_every_host_and_this_task(name: str) -> None:
    processes = launcher_for(name).processes(_context(name))
    configs = [json.loads(p.env["TF_CONFIG"]) for p in processes]
    for config in configs:
        addresses = [a for role in config["cluster"].values() for a in role]
        assert {a.split(":")[0] for a in addresses} == set(HOSTS)
        assert len(set(addresses)) == len(addresses)  # no two tasks share a host and port
    tasks = {(c["task"]["type"], c["task"]["index"]) for c in configs}
    expected = {
        "multi_worker_mirrored_strategy": {("worker", 2), ("worker", 3)},
        "parameter_server": {("worker", 0), ("ps", 1)},
    }[name]
    assert tasks == expected


def test_every_spec_launcher_is_in_the_table_or_refused() -> None:
    assert available_launchers() == frozenset(LAUNCHERS)
    with pytest.raises(ValueError, match="no launcher 'mpi'"):
        launcher_for("mpi")
