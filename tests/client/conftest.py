"""Fixtures of the client tests: a scripted REST API on a real loopback HTTP server, and the
control-plane settings for the tests that run against the real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client._scripted_api import ScriptedAPI, scripted_api
from tests.control import conftest as _control

settings = _control.settings


@pytest.fixture
def api() -> Iterator[ScriptedAPI]:
    with scripted_api() as scripted:
        yield scripted
