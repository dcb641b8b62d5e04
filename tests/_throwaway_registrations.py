"""A pytest plugin that registers a throwaway ``"throwaway"`` entry in every registry that has a
conformance suite (only in the child pytest of tests/test_registry_pickup.py, which collects the
suites and checks each made tests for it). The entries are never run: collection is enough to
show that a suite parametrizes over its registry rather than over a list of its own.
"""

from __future__ import annotations

from trainops.actions import ACTIONS, ActionResult
from trainops.agent.channels import KINDS
from trainops.agent.launchers import LAUNCHERS
from trainops.agent.sidecars import SIDECARS
from trainops.backends import BACKENDS, LocalBackend
from trainops.control.services import SERVICES
from trainops.data.packer._formats import FORMATS
from trainops.data.streaming._dataset import SHARD_SOURCES
from trainops.rules import RULES, StepOutlier
from trainops.server.ui import PAGES, Page
from trainops.storage import STORES

THROWAWAY = "throwaway"


def _never(*args: object, **kwargs: object) -> ActionResult:
    raise AssertionError("a throwaway entry is only collected, never run")


BACKENDS.register(THROWAWAY, LocalBackend)
STORES.register(THROWAWAY, _never)  # type: ignore[arg-type]
LAUNCHERS.register(THROWAWAY, LAUNCHERS.lookup("plain"))
KINDS.register(THROWAWAY, _never)  # type: ignore[arg-type]
SIDECARS.register(THROWAWAY, _never)  # type: ignore[arg-type]
SERVICES.register(THROWAWAY, _never)  # type: ignore[arg-type]
RULES.register(THROWAWAY, StepOutlier)
ACTIONS.register(THROWAWAY, _never)
FORMATS.register(THROWAWAY, FORMATS.lookup("shards"))
SHARD_SOURCES.register(THROWAWAY, _never)  # type: ignore[arg-type]
PAGES.register(THROWAWAY, Page("/ui/throwaway", "Throwaway", _never))
