"""A byte-progress bar that appears only when a transfer takes more than a moment.

tqdm is imported only once the bar is due, so quick transfers (the common case: a small source
directory into the local store) cost nothing and print nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["TransferBar"]

# Below this, a bar would only flash on the screen.
SHOW_AFTER_S = 0.5


class TransferBar:
    """Call it with byte deltas (a :data:`trainops.storage.ByteCallback`); ``close()`` at the end."""

    def __init__(
        self,
        total: int,
        description: str,
        *,
        enabled: bool = True,
        show_after: float = SHOW_AFTER_S,
    ) -> None:
        self.total = total
        self.description = description
        self.enabled = enabled
        self.show_after = show_after
        self.done = 0
        self._started = time.monotonic()
        self._bar: Any = None

    def __call__(self, delta: int) -> None:
        self.done += delta
        if self._bar is not None:
            self._bar.update(delta)
        elif self.enabled and time.monotonic() - self._started >= self.show_after:
            self._bar = self._open()

    def __enter__(self) -> TransferBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _open(self) -> Any:
        from tqdm import tqdm

        return tqdm(
            total=self.total,
            initial=self.done,
            desc=self.description,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            file=sys.stderr,
            leave=False,
            dynamic_ncols=True,
        )
