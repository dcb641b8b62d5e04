"""Metric scraping: the spec's regexes applied to every line the script writes.

As on SageMaker, each definition's first capture group (found with ``re.search``) is the value;
a capture that is not a finite number is ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from trainops.agent._job import MetricPattern

__all__ = ["MetricScraper"]


class MetricScraper:
    """Compiled metric definitions; :meth:`scan` turns a log line into metric points."""

    def __init__(self, definitions: Iterable[MetricPattern | tuple[str, str]]) -> None:
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        for definition in definitions:
            name, regex = (
                (definition.name, definition.regex)
                if isinstance(definition, MetricPattern)
                else definition
            )
            pattern = re.compile(regex)
            if pattern.groups < 1:
                raise ValueError(f"metric {name!r}: regex {regex!r} needs a capture group")
            self._patterns.append((name, pattern))

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def scan(self, line: str, ts: float) -> list[tuple[str, float, float]]:
        """``(name, value, ts)`` for every definition that matches ``line``."""
        points = []
        for name, pattern in self._patterns:
            match = pattern.search(line)
            if match is None or match.group(1) is None:
                continue
            try:
                value = float(match.group(1))
            except ValueError:
                continue
            if math.isfinite(value):
                points.append((name, value, ts))
        return points
