"""Every launcher passes the same suite, on the first host and on another: what it starts covers
the host's ranks with the full rendezvous environment on top of the SageMaker contract, and
nothing else is changed; a host it reaches with the job's remote shell runs the keeper."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import NamedTuple

import pytest

from tests._support.system import require
from trainops.agent.launchers import (
    LAUNCHERS,
    LaunchContext,
    LaunchError,
    RankProcess,
    available_launchers,
    launcher_for,
    remote_shell_paths,
)
from trainops.agent.launchers.remote_shell import SOCKET_ENV
from trainops.agent.supervision._rank_report import TAG_STYLES
from trainops.spec import JobSpec

HOSTS = ("algo-1", "algo-2")
PER_HOST = 2
RANK_VARIABLES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"}


def _context(launcher: str, host_index: int = -1) -> LaunchContext:
    switch = {
        "plain": {},
        "pytorchddp": {"pytorchddp": {"enabled": True}},
        "smdistributed.dataparallel": {"smdistributed": {"dataparallel": {"enabled": True}}},
        "torch_distributed": {"torch_distributed": {"enabled": True}},
        "multi_worker_mirrored_strategy": {"multi_worker_mirrored_strategy": {"enabled": True}},
        "parameter_server": {"parameter_server": {"enabled": True}},
        "mpi": {"mpi": {"enabled": True, "custom_mpi_options": "-mca btl_tcp_if_exclude docker0"}},
    }[launcher]
    hosts = _hosts(launcher)
    job = JobSpec(
        entry_point="train.py",
        instance_count=len(hosts),
        distribution={**switch, "processes_per_host": _per_host(launcher)},
    ).view()
    assert job.distribution.launcher == launcher
    current = hosts[host_index]
    return LaunchContext(
        job=job,
        job_name="job-1",
        attempt=1,
        hosts=hosts,
        current_host=current,
        command=("/venv/bin/python", "train.py", "--lr", "0.1"),
        python="/venv/bin/python",
        entry_point="train.py",
        script_args=("--lr", "0.1"),
        env=_contract(hosts, current),
        master_addr="algo-1",
        master_port=23456,
        remote_shell=remote_shell_paths(Path("/run/rsh"), "key") if len(hosts) > 1 else None,
    )


class Launched(NamedTuple):
    name: str
    ctx: LaunchContext
    processes: list[RankProcess]

    @property
    def index(self) -> int:
        return self.ctx.host_index

    def is_keeper(self, process: RankProcess) -> bool:
        """A host reached by the remote shell runs the keeper instead of the script."""
        shell = self.ctx.remote_shell
        return shell is not None and process.argv == shell.keeper


def _hosts(launcher: str) -> tuple[str, ...]:
    """Two hosts, or as many as the launcher can span; this host is the last of them."""
    limit = LAUNCHERS[launcher].max_hosts
    return HOSTS if limit is None else HOSTS[:limit]


def _contract(hosts: tuple[str, ...], current: str) -> dict[str, str]:
    return {
        "SM_CURRENT_HOST": current,
        "SM_HOSTS": json.dumps(list(hosts)),
        "PATH": os.environ.get("PATH", ""),
    }


def _per_host(launcher: str) -> int:
    return 1 if launcher == "parameter_server" else PER_HOST  # one script per host there


@pytest.fixture(
    params=[(name, index) for name in LAUNCHERS.names() for index in (0, -1)],
    ids=lambda p: f"{p[0]}-{'first' if p[1] == 0 else 'other'}-host",
)
def launched(request: pytest.FixtureRequest) -> Launched:
    name, index = request.param
    if name == "mpi":
        require("mpirun")
    ctx = _context(name, index)
    return Launched(name, ctx, launcher_for(name).processes(ctx))


def _scripts(launched: Launched) -> list[RankProcess]:
    return [p for p in launched.processes if not p.auxiliary and not launched.is_keeper(p)]


def test_tagged_output_is_in_a_registered_tag_style(launched: Launched) -> None:
    for process in launched.processes:
        assert process.output_tags is None or process.output_tags in TAG_STYLES.names()


def test_argv_is_a_list_of_plain_arguments(launched: Launched) -> None:
    assert launched.processes
    for process in launched.processes:
        assert process.argv and all(isinstance(a, str) and a for a in process.argv)
        assert not {"-c", "sh", "/bin/sh"} & set(process.argv[:2])  # never a shell string
    for process in _scripts(launched):
        assert "train.py" in process.argv and process.argv[-2:] == ("--lr", "0.1")


def test_the_contract_reaches_every_process_unchanged(launched: Launched) -> None:
    ctx = launched.ctx
    contract = _contract(ctx.hosts, ctx.current_host)
    for process in launched.processes:
        assert {k: process.env[k] for k in contract} == contract


def test_every_process_agrees_on_the_master(launched: Launched) -> None:
    for process in _scripts(launched):
        assert (process.env["MASTER_ADDR"], process.env["MASTER_PORT"]) == ("algo-1", "23456")


def test_only_other_hosts_run_the_keeper_and_alone(launched: Launched) -> None:
    keepers = [p for p in launched.processes if launched.is_keeper(p)]
    if keepers:
        assert launched.index > 0 and launched.processes == keepers == keepers[:1]
        assert keepers[0].rank is None and keepers[0].output_tags is None


def test_a_launcher_that_reaches_hosts_uses_the_jobs_remote_shell(launched: Launched) -> None:
    shell = launched.ctx.remote_shell
    for process in _scripts(launched):
        argv = list(process.argv)
        if "plm_rsh_agent" in argv:  # mpirun: the job's remote shell, never ssh
            assert shell is not None and argv[argv.index("plm_rsh_agent") + 1] == " ".join(
                shell.agent
            )
            assert process.env[SOCKET_ENV] == shell.env[SOCKET_ENV]
        else:
            assert SOCKET_ENV not in process.env


def test_the_hosts_ranks_are_covered_once(launched: Launched) -> None:
    name, processes = launched.name, launched.processes
    per_host, hosts = _per_host(name), launched.ctx.hosts
    index = launched.index
    ranked = [p for p in processes if p.rank is not None]
    scripts = _scripts(launched)
    if not scripts:  # reached by the remote shell: the first host's launcher starts its ranks
        assert index > 0 and all(launched.is_keeper(p) for p in processes)
    elif per_host == 1:  # one script per host: untagged, and its rank is the host's
        [script] = scripts
        assert script.rank is None and script.output_tags is None
        assert (script.env["RANK"], script.env["WORLD_SIZE"]) == (str(index), str(len(hosts)))
    elif ranked:  # the launcher starts the ranks itself
        assert [p.rank for p in ranked] == list(range(index * per_host, (index + 1) * per_host))
        for p in ranked:
            assert set(p.env) >= RANK_VARIABLES
            assert p.env["RANK"] == str(p.rank) and p.env["LOCAL_RANK"] == str(p.local_rank)
            assert p.env["WORLD_SIZE"] == str(len(hosts) * per_host)
            assert p.env["LOCAL_WORLD_SIZE"] == str(per_host)
            assert (p.env["GROUP_RANK"], p.env["NODE_RANK"]) == (str(index), str(index))
    else:  # one process per host that starts and tags the ranks (torchrun, mpirun)
        [process] = processes
        assert process.output_tags in ("torchrun", "mpirun")
        argv = list(process.argv)
        if process.output_tags == "torchrun":
            assert argv[argv.index("--nproc_per_node") + 1] == str(per_host), name
            assert argv[argv.index("--node_rank") + 1] == str(index)
            assert argv[argv.index("--nnodes") + 1] == str(len(hosts))
            # the host's global ranks, for its tags and describe's Ranks
            assert (process.rank_base, process.rank_count) == (index * per_host, per_host)
            # torchrun's own header always, whatever prefix template the job's environment sets
            template = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[${rank}]:"}
            ctx = dataclasses.replace(launched.ctx, env={**launched.ctx.env, **template})
            [again] = launcher_for(name).processes(ctx)
            assert not set(template) & set(again.env)
        else:
            assert argv[argv.index("-np") + 1] == str(len(hosts) * per_host)
            assert argv[argv.index("--host") + 1] == ",".join(f"{h}:{per_host}" for h in hosts)
            assert argv[-5:] == ["-m", "mpi4py", "train.py", "--lr", "0.1"]
            assert "btl_tcp_if_exclude" in argv  # custom_mpi_options, as arguments


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
    with pytest.raises(ValueError, match=r"unknown launcher 'pytorchxla' \(known: plain, "):
        launcher_for("pytorchxla")


def test_mpi_across_hosts_without_host_names_is_refused_with_the_reason() -> None:
    require("mpirun")
    ctx = dataclasses.replace(_context("mpi", 0), master_addr="127.0.0.1")  # no namespaces
    with pytest.raises(LaunchError, match="each host's own name"):
        launcher_for("mpi").processes(ctx)
    alone = dataclasses.replace(ctx, remote_shell=None)
    with pytest.raises(LaunchError, match="remote shell"):
        launcher_for("mpi").processes(alone)


@pytest.mark.parametrize("name", ["pytorchddp", "smdistributed.dataparallel"])
def test_the_data_parallel_runner_gives_its_ranks_the_library_last_on_the_path(name: str) -> None:
    from trainops.agent.launchers._smddp_site import SMDDP_SITE

    for index in (0, -1):  # two hosts: the first and another
        ctx = _context(name, index)
        ctx = dataclasses.replace(ctx, env={**ctx.env, "PYTHONPATH": f"/code{os.pathsep}/user"})
        for process in launcher_for(name).processes(ctx):
            assert process.env["PYTHONPATH"].split(os.pathsep) == [
                "/code",
                "/user",
                str(SMDDP_SITE),
            ]
            assert process.env["SMDATAPARALLEL_USE_HOMOGENEOUS"] == "1"
    alone = dataclasses.replace(_context(name), hosts=("algo-1",), current_host="algo-1")
    [first, *_] = launcher_for(name).processes(alone)
    assert first.env["SMDATAPARALLEL_USE_SINGLENODE"] == "1"
    assert "SMDATAPARALLEL_USE_HOMOGENEOUS" not in first.env
    assert (SMDDP_SITE / "smdistributed" / "dataparallel" / "torch" / "torch_smddp.py").is_file()


def test_other_launchers_leave_the_library_out() -> None:
    from trainops.agent.launchers._smddp_site import SMDDP_SITE

    for name in ("plain", "torch_distributed"):
        for process in launcher_for(name).processes(_context(name)):
            assert str(SMDDP_SITE) not in process.env.get("PYTHONPATH", "")
            assert not any(k.startswith("SMDATAPARALLEL_") for k in process.env)


def test_the_data_parallel_runner_applies_what_its_mpi_options_export() -> None:
    from trainops.agent.launchers._smddp_site import SMDDP_SITE

    options = "-verbose -x NCCL_DEBUG=VERSION -x RANK=7 -x TRAINOPS_X=1 -x PYTHONPATH=/mine"
    job = JobSpec(
        entry_point="train.py",
        instance_count=2,
        distribution={
            "smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": options}},
            "processes_per_host": 2,
        },
    ).view()
    ctx = dataclasses.replace(_context("smdistributed.dataparallel"), job=job)
    processes = launcher_for("smdistributed.dataparallel").processes(ctx)
    assert [p.env["RANK"] for p in processes] == ["2", "3"]  # never an export's
    for process in processes:
        assert process.env["NCCL_DEBUG"] == "VERSION"  # as mpirun's -x would set it
        assert "TRAINOPS_X" not in process.env and "-verbose" not in process.argv
        assert process.env["PYTHONPATH"].split(os.pathsep) == ["/mine", str(SMDDP_SITE)]
