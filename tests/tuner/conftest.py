"""Fixtures of the tuner tests: settings with room for two trials at once, no agent left behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control._harness import kill_leftover_agents
from trainops._settings import LocalCapacity, Settings


@pytest.fixture
def settings(trainops_home: Path) -> Iterator[Settings]:
    configured = Settings(
        home=trainops_home, capacity=LocalCapacity(cpus=4, memory_mb=64_000, gpus=0)
    )
    yield configured
    kill_leftover_agents(configured)
