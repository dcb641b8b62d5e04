"""Fixtures every channel test shares: a host's channel context, and no thread left behind.

A module may define its own ``nothing_left_running`` (the conformance suite also checks child
processes); pytest then uses that one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.channels._support import Host, threads_now, wait_until
from trainops._settings import Settings


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    before = threads_now()
    yield
    wait_until(lambda: not threads_now() - before)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "hosts", Settings(home=tmp_path))
