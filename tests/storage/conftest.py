"""The store matrix: every scheme registered in ``trainops.storage.STORES``, each on a real backend.

``file://`` runs on ``tmp_path``; ``s3://`` runs on the session's SeaweedFS server (marked ``s3``),
in one bucket the session's cases share, each under a prefix of its own (a new bucket costs weed
a collection and a volume: up to a second each, where a prefix costs nothing).
A scheme added to ``STORES`` without a recipe here fails loudly, so every new store inherits the
conformance suite instead of silently skipping it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._support.seaweed import SeaweedS3
from trainops._settings import Settings
from trainops.storage import STORES, ObjectStore, join_uri, store_for


@dataclass(frozen=True)
class StoreCase:
    """One store under test and a fresh, empty prefix that belongs to this test alone."""

    scheme: str
    store: ObjectStore
    root: str
    settings: Settings

    def uri(self, *parts: str) -> str:
        return join_uri(self.root, *parts)


def _file_case(request: pytest.FixtureRequest, home: Path) -> StoreCase:
    settings = Settings(home=home)
    root = (request.getfixturevalue("tmp_path") / "objects").as_uri()
    return StoreCase("file", store_for(root, settings), root, settings)


@pytest.fixture(scope="session")
def cases_bucket(s3_server: SeaweedS3) -> str:
    """The bucket of the session's ``s3`` cases."""
    return s3_server.create_bucket("cases")


def _s3_case(request: pytest.FixtureRequest, home: Path) -> StoreCase:
    settings: Settings = request.getfixturevalue("s3_settings")
    bucket = request.getfixturevalue("cases_bucket")
    root = f"s3://{bucket}/{uuid.uuid4().hex[:12]}/conformance"
    return StoreCase("s3", store_for(root, settings), root, settings)


RECIPES: dict[str, Callable[[pytest.FixtureRequest, Path], StoreCase]] = {
    "file": _file_case,
    "s3": _s3_case,
}
MARKS = {"s3": [pytest.mark.s3]}


@pytest.fixture(params=[pytest.param(s, marks=MARKS.get(s, []), id=s) for s in STORES.names()])
def case(request: pytest.FixtureRequest, trainops_home: Path) -> StoreCase:
    scheme: str = request.param
    recipe = RECIPES.get(scheme)
    if recipe is None:
        pytest.fail(f"no conformance recipe for {scheme}:// — add one to {__file__}", pytrace=False)
    return recipe(request, trainops_home)
