"""The rule contract: :class:`ProfilerRule` evaluates :class:`ProfilerData` into a :class:`RuleResult`.

A rule is made from its parameters (checked and completed with the catalog's defaults,
``trainops.spec._rule_catalog``) and evaluated as often as its caller likes, on everything
recorded so far: the live service every ``scan_interval_us``, the report once. A rule keeps no
state between evaluations, so the same data gives the same result.

:class:`RuleResult` is the stable, JSON-serialisable verdict every consumer reads (the rules
service's rows, the report, webhooks)::

    {"status": "IssuesFound" | "NoIssuesFound" | "InProgress",
     "details": "one line, with the numbers",
     "recommendation": "what to change (empty when nothing is found)",
     "evidence": {...small JSON object of numbers, by host / GPU / rank...}}

``InProgress`` means "not enough data yet" (``patience`` not reached, nothing recorded); a rule
evaluated on the data of a job that has ended never answers it: the base class turns it into
``NoIssuesFound`` with the same details, so a short job still gets a verdict.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from trainops.profiler import ProfilerReader, Series
from trainops.spec._rule_catalog import check_rule_parameters

__all__ = [
    "IN_PROGRESS",
    "ISSUES_FOUND",
    "NO_ISSUES_FOUND",
    "STATUSES",
    "ProfilerData",
    "ProfilerRule",
    "RuleResult",
]

ISSUES_FOUND = "IssuesFound"
NO_ISSUES_FOUND = "NoIssuesFound"
IN_PROGRESS = "InProgress"
STATUSES = frozenset({ISSUES_FOUND, NO_ISSUES_FOUND, IN_PROGRESS})


@dataclass(frozen=True, slots=True)
class RuleResult:
    """One rule's verdict on the data so far (see the module docstring for the JSON shape)."""

    status: str
    details: str
    recommendation: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(
                f"{self.status!r} is not a rule status ({', '.join(sorted(STATUSES))})"
            )

    @property
    def found(self) -> bool:
        return self.status == ISSUES_FOUND

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "details": self.details,
            "recommendation": self.recommendation,
            "evidence": _plain(self.evidence),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RuleResult:
        return cls(
            str(raw["status"]),
            str(raw["details"]),
            str(raw.get("recommendation", "")),
            dict(raw.get("evidence") or {}),
        )


def _plain(value: Any) -> Any:
    """``value`` with floats rounded to 6 significant digits and NaN/inf as None (strict JSON)."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.6g}")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class ProfilerData:
    """A read-only view of one job's profiler data, as rules see it.

    ``system``: host -> system series; ``steps`` and ``dataloader``: (host, rank) -> series;
    ``meta``: host -> ``meta/<host>.json``; ``job_start``: when the job began (Unix seconds,
    None when unknown); ``job_end``: when it ended (None while it runs); ``now``: the time of
    the evaluation. Rules must not change the series.
    """

    system: Mapping[str, Series] = field(default_factory=dict)
    steps: Mapping[tuple[str, int], Series] = field(default_factory=dict)
    dataloader: Mapping[tuple[str, int], Series] = field(default_factory=dict)
    meta: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    job_start: float | None = None
    job_end: float | None = None
    now: float | None = None
    # Derived tables (system snapshots grouped within 20 ms), computed once per view.
    cache: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def ended(self) -> bool:
        return self.job_end is not None

    @classmethod
    def from_reader(
        cls,
        reader: ProfilerReader,
        *,
        job_start: float | None = None,
        job_end: float | None = None,
        now: float | None = None,
    ) -> ProfilerData:
        """A view of what ``reader`` has read so far."""
        system = {k.host: s for k, s in reader.of_kind("system").items()}
        steps = {(k.host, k.rank or 0): s for k, s in reader.of_kind("steps").items()}
        loader = {(k.host, k.rank or 0): s for k, s in reader.of_kind("dataloader").items()}
        return cls(
            MappingProxyType(system),
            MappingProxyType(steps),
            MappingProxyType(loader),
            MappingProxyType({h: MappingProxyType(m) for h, m in reader.meta.items()}),
            job_start,
            job_end,
            now,
        )

    @property
    def hosts(self) -> list[str]:
        """Every host with system metrics or meta, sorted."""
        return sorted(set(self.system) | set(self.meta))


class ProfilerRule(ABC):
    """A profiler rule: made from its parameters, evaluated on a job's data.

    Subclasses set :attr:`name` (the catalog's name) and implement :meth:`_evaluate`.
    """

    #: The built-in rule's name, as in ``rules: [{rule: <name>}]``.
    name: ClassVar[str]

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        self.parameters: dict[str, Any] = check_rule_parameters(self.name, parameters or {})

    def evaluate(self, data: ProfilerData) -> RuleResult:
        """The verdict on ``data``; never InProgress once the job has ended."""
        result = self._evaluate(data)
        if result.status == IN_PROGRESS and data.ended:
            return RuleResult(NO_ISSUES_FOUND, result.details, "", result.evidence)
        return result

    @abstractmethod
    def _evaluate(self, data: ProfilerData) -> RuleResult:
        """The verdict on ``data`` (InProgress when there is not enough of it yet)."""

    def number(self, key: str) -> float:
        """A numeric parameter."""
        return float(self.parameters[key])

    def whole(self, key: str) -> int:
        """A whole-number parameter (patience, window, n_outliers)."""
        return int(self.parameters[key])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.parameters!r})"
