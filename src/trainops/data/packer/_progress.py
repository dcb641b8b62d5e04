"""The progress bar of ``trainops pack``: bytes packed, on stderr, only where asked."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["ProgressBar"]


class ProgressBar:
    """A context manager whose value is ``advance(files, bytes)``."""

    def __init__(self, enabled: bool, total: int, initial: int) -> None:
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                initial=initial,
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                desc="packing",
            )

    def __enter__(self) -> Callable[[int, int], None]:
        return self._advance

    def _advance(self, files: int, size: int) -> None:
        if self._bar is not None:
            self._bar.update(size)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
