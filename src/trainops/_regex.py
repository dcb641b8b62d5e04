"""Screening a regex that someone else's names will be matched with (a job's, an API caller's).

Python's ``re`` backtracks: ``(a+)+$`` takes exponential time on a name of thirty ``a``s, and
``.*a.*a.*a.*b`` minutes on a 1,024-character one. A collection's ``include_regex`` read from a
job's ``collections`` file is the job's input, matched by whoever reads the trial (the control
plane's rules included), so such a pattern is refused: no repeat inside a repeat (star height
one; an alternation inside a repeat counts as one, ``(a|a)*`` backtracks as ``(a*)*``), and at
most two unbounded repeats (``*``, ``+``, ``{n,}`` or a bound over 16).

The check is pure (the standard library's own parser, no matching) and lives here, in the
foundation, so that the spec refuses at submit a pattern the debugger's trial reader would refuse
later (a job whose collections file the reader refuses has rules that quietly see nothing).
"""

from __future__ import annotations

import re._parser as _sre  # type: ignore[import-not-found]  # the stdlib's own parser
from typing import Any

__all__ = ["MAX_PATTERNS", "MAX_PATTERN_CHARS", "check_untrusted_regex"]

MAX_PATTERN_CHARS = 1_000  # one pattern's length
MAX_PATTERNS = 100  # patterns of one collection

_MAX_UNBOUNDED = 2
_BIG = 16
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT}


def check_untrusted_regex(pattern: str) -> None:
    """Refuse (``ValueError``) a pattern whose matching time could blow up on a short name."""
    try:
        height, unbounded = _measure(_sre.parse(pattern), 0)
    except _sre.error as err:
        raise ValueError(f"{pattern[:100]!r} is not a regular expression ({err})") from None
    except RecursionError:
        raise ValueError(f"{pattern[:100]!r}: groups nested too deeply") from None
    if height > 1:
        raise ValueError(
            f"{pattern[:100]!r}: a repeat inside a repeat (its matching time could blow up)"
        )
    if unbounded > _MAX_UNBOUNDED:
        raise ValueError(
            f"{pattern[:100]!r}: {unbounded} unbounded repeats, at most {_MAX_UNBOUNDED} "
            "(its matching time could blow up)"
        )


def _measure(items: Any, depth: int) -> tuple[int, int]:
    """The deepest nesting of repeats under ``items`` and how many are unbounded."""
    worst, unbounded = depth, 0
    for op, av in items:
        if op == _sre.BRANCH and depth:
            worst = max(worst, depth + 1)  # (a|a)* backtracks as (a*)* does
        for sub, deeper, big in _children(op, av):
            height, count = _measure(sub, depth + deeper)
            worst, unbounded = max(worst, height), unbounded + count + big
    return worst, unbounded


def _children(op: Any, av: Any) -> list[tuple[Any, int, int]]:
    """``(sub-pattern, added repeat depth, 1 if it is an unbounded repeat)`` of one node."""
    if op in _REPEATS:
        _low, high, sub = av
        big = high == _sre.MAXREPEAT or high > _BIG
        return [(sub, 1 if high > 1 else 0, int(big))]
    if op == _sre.SUBPATTERN:
        return [(av[-1], 0, 0)]
    if op == _sre.BRANCH:
        return [(branch, 0, 0) for branch in av[1]]
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [(av[1], 0, 0)]
    return []
