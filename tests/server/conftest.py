"""Fixtures of the server tests: a control plane with fake agents, reached over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control._harness import ControlPlane, control_plane, kill_leftover_agents
from trainops._settings import LocalCapacity, Settings


@pytest.fixture
def settings(trainops_home: Path) -> Iterator[Settings]:
    configured = Settings(
        home=trainops_home, capacity=LocalCapacity(cpus=4, memory_mb=64_000, gpus=0)
    )
    yield configured
    kill_leftover_agents(configured)


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running
