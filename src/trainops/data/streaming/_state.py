"""The resumable position of a :class:`StreamingDataset`: epoch, records consumed, seed.

``state_dict()`` is that position plus what it applies to (the dataset's fingerprint, the world
size, the shuffle settings): a few numbers and strings, restored in O(1). Loading checks each
field and refuses a state saved for other data or another layout, naming the field, since the
same position would then mean other records. The seed is taken from the state: a resumed run
continues the interrupted run's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["STATE_VERSION", "StreamState"]

STATE_VERSION = 1
_NUMBERS = ("epoch", "consumed", "seed")


@dataclass(frozen=True, slots=True)
class StreamState:
    """Epoch ``epoch``, of which ``consumed`` records (of this rank) were taken."""

    seed: int = 0
    epoch: int = 0
    consumed: int = 0

    def moved(self, **changes: int) -> StreamState:
        return replace(self, **changes)

    def as_dict(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        numbers = {"epoch": self.epoch, "consumed": self.consumed, "seed": self.seed}
        return {"version": STATE_VERSION, **numbers, **identity}

    @classmethod
    def load(cls, state: Mapping[str, Any], identity: Mapping[str, Any]) -> StreamState:
        """The position in ``state``, checked against this dataset's ``identity``."""
        if not isinstance(state, Mapping):
            raise ValueError(f"a StreamingDataset state is a dict, not {type(state).__name__}")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"state version {state.get('version')!r} is not {STATE_VERSION}")
        for name in _NUMBERS:
            value = state.get(name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"state field {name!r}: {value!r} is not a count (0 or more)")
        for name, expected in identity.items():
            if state.get(name) != expected:
                raise ValueError(
                    f"state field {name!r} is {state.get(name)!r}, this dataset has "
                    f"{expected!r}: the saved position would point at other records"
                )
        return cls(seed=state["seed"], epoch=state["epoch"], consumed=state["consumed"])
