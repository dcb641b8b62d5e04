"""Fixtures of the server tests: a control plane with fake agents, reached over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.control import conftest as _control
from tests.control._harness import ControlPlane, control_plane
from trainops._settings import Settings

# The control-plane tests' settings fixture (fixed capacity, no agent left behind), shared.
settings = _control.settings


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running
