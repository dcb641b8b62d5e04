"""A job of several processes gets the bootstrap with its pause at exit (gloo's work threads
would otherwise abort a rank that has done all its work); a job of one gets nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.agent.sidecars.test_conformance import make_host
from trainops.agent.sidecars import SIDECARS
from trainops.profiler._bootstrap import BOOTSTRAP_DIR, YIELD_AT_EXIT_ENV


@pytest.mark.parametrize(
    "spec",
    [
        {"instance_count": 2},
        {"distribution": {"torch_distributed": {"enabled": True}, "processes_per_host": 2}},
    ],
)
def test_the_processes_of_a_job_of_several_pause_at_exit(
    tmp_path: Path, spec: dict[str, Any]
) -> None:
    host = make_host(tmp_path, **spec)
    sidecar = SIDECARS["framework"](host.context)  # as the agent's set makes it
    assert sidecar is not None
    env = sidecar.environment({"PYTHONPATH": "/users/own"})
    assert env[YIELD_AT_EXIT_ENV] == "1"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(BOOTSTRAP_DIR), "/users/own"]


def test_a_job_of_one_process_gets_nothing(tmp_path: Path) -> None:
    assert SIDECARS["framework"](make_host(tmp_path).context) is None
