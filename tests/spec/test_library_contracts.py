"""Guards on the two places where trainops leans on a library's internals.

Each test fails loudly, naming what to revisit, if a pydantic or uvicorn release changes the
behaviour trainops relies on, instead of letting error locations or shutdown silently degrade.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import uvicorn

from trainops._errors import SpecError
from trainops._settings import Settings
from trainops.server import EmbeddedServer
from trainops.spec import Channel, JobSpec


def test_pydantic_validates_nested_spec_models_past_their_wrapping_init() -> None:
    """spec/_base.py and Channel mark their ``__init__`` with ``__pydantic_base_init__``, so a
    nested model is validated by pydantic-core directly and its errors keep their full location.
    Without that flag pydantic would call the wrapper, whose SpecError loses the path."""
    with pytest.raises(SpecError) as caught:
        JobSpec(
            entry_point="train.py",
            instance_type="ml.m5.large",
            inputs={"train": {"uri": "s3://bucket/x", "mode": "Nope"}},
        )
    paths = [path for path, _reason in caught.value.problems]
    assert paths == ["inputs.train.mode"], (
        "pydantic no longer honours __pydantic_base_init__ (spec/_base.py): nested errors lost "
        f"their location, got {paths}"
    )


def test_a_channel_on_its_own_still_raises_a_spec_error() -> None:
    with pytest.raises(SpecError, match="mode"):
        Channel("s3://bucket/x", mode="Nope")


def test_uvicorn_still_runs_the_main_loop_trainops_overrides(tmp_path: Path) -> None:
    """server/_run.py overrides ``uvicorn.Server.main_loop`` (whose own loop notices a stop only
    every 0.1 s) and calls ``on_tick``; both must still exist and be used by ``serve``."""
    assert inspect.iscoroutinefunction(uvicorn.Server.main_loop)
    assert list(inspect.signature(uvicorn.Server.on_tick).parameters) == ["self", "counter"]
    settings = Settings.load({"TRAINOPS_HOME": str(tmp_path / "home")})
    with EmbeddedServer(settings) as server:
        http = server._server
        assert http is not None
        assert http._wake is not None, "uvicorn no longer calls main_loop: revisit server/_run.py"


def test_uvicorn_still_has_what_the_quick_shutdown_uses(tmp_path: Path) -> None:
    """server/_uvicorn.py replaces ``uvicorn.Server.shutdown`` (whose fixed 0.1 s sleeps every
    embedded ``trainops run`` would pay) and reads the server's connections, tasks, listening
    servers and lifespan: they must still be there under those names."""
    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]
    settings = Settings.load({"TRAINOPS_HOME": str(tmp_path / "home")})
    with EmbeddedServer(settings) as server:
        http = server._server
        assert http is not None
        state = http.server_state
        missing = [
            name
            for name, present in (
                ("server_state.connections", hasattr(state, "connections")),
                ("server_state.tasks", hasattr(state, "tasks")),
                ("servers", isinstance(getattr(http, "servers", None), list)),
                ("lifespan.shutdown", hasattr(getattr(http, "lifespan", None), "shutdown")),
                ("force_exit", hasattr(http, "force_exit")),
                (
                    "config.timeout_graceful_shutdown",
                    hasattr(http.config, "timeout_graceful_shutdown"),
                ),
            )
            if not present
        ]
        assert missing == [], f"uvicorn changed: revisit server/_uvicorn.py ({missing})"
