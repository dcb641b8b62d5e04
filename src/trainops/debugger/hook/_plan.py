"""Which collections the hook saves, with every setting filled in, and which of them a step saves.

Built once, at the first step (as smdebug prepares its collections then, so collections added
after the hook was made still count): the included collections (those asked for, ``losses``
always, ``all`` with ``save_all``, ``default`` with ``include_regex``), each with the hook's
save and reduction configs where it has none of its own; scalar collections keep the raw
value and no histogram. Gradients are never saved in EVAL or PREDICT steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainops.debugger.config import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
)
from trainops.debugger.hook._names import matches
from trainops.debugger.modes import ModeKeys

__all__ = ["SavePlan"]

_TRAIN_ONLY = (CollectionKeys.GRADIENTS, CollectionKeys.OPTIMIZER_VARIABLES)


class SavePlan:
    """The included collections, and per tensor name the ones it belongs to (cached)."""

    def __init__(
        self,
        manager: CollectionManager,
        include: Iterable[str],
        save_config: SaveConfig,
        reduction_config: ReductionConfig,
    ) -> None:
        names = set(include)
        everything = CollectionKeys.ALL in names
        self.collections: tuple[Collection, ...] = tuple(
            c for n, c in sorted(manager.get_collections().items()) if everything or n in names
        )
        for collection in self.collections:
            _fill(collection, save_config, reduction_config)
        self._of: dict[str, tuple[Collection, ...]] = {}

    def of(self, name: str) -> tuple[Collection, ...]:
        """The included collections ``name`` belongs to (each then lists it by name, as
        smdebug's collections file does, so a reader needs no regex)."""
        found = self._of.get(name)
        if found is None:
            found = self._of[name] = tuple(c for c in self.collections if matches(c, name))
        return found

    def saved(self, name: str, collections: Iterable[Collection]) -> None:
        """``name`` was saved in ``collections``: they list it from now on."""
        for collection in collections:
            if name not in collection.tensor_names:
                collection.add_tensor_name(name)

    def forget(self) -> None:
        """Drop the cached memberships (collections changed)."""
        self._of.clear()

    def saving(self, mode: ModeKeys, mode_step: int) -> frozenset[Collection]:
        """The collections saved at ``mode_step`` of ``mode``."""
        return frozenset(
            c
            for c in self.collections
            if not (mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and c.name in _TRAIN_ONLY)
            and c.save_config is not None
            and c.save_config.should_save_step(mode, mode_step)
        )

    def wants(self, name: str) -> bool:
        """Whether any included collection could hold ``name``."""
        return bool(self.of(name))


def _fill(collection: Collection, save: SaveConfig, reduction: ReductionConfig) -> None:
    if collection.name in NON_HISTOGRAM_COLLECTIONS:
        collection.save_histogram = False
    if collection.save_config is None:
        collection.save_config = save
    if collection.name in NON_REDUCTION_COLLECTIONS:
        collection.reduction_config = ReductionConfig(save_raw_tensor=True)
    elif collection.reduction_config is None:
        collection.reduction_config = reduction
