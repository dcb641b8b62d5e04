"""Collections: named groups of tensors with their own save and reduction configs.

A :class:`Collection` holds tensors by name and by ``include_regex`` (any match adds a tensor);
its ``reduction_config`` and ``save_config`` override the hook's when set. The
:class:`CollectionManager` owns a job's collections and ``num_workers``; it serialises to
smdebug's ``collections/000000000/<worker>_collections.json`` shape
(``{"collections": {name: {...}}, "_meta": {"num_workers": n}}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainops._regex import MAX_PATTERN_CHARS, MAX_PATTERNS, check_untrusted_regex
from trainops.debugger.config._reduction_config import ReductionConfig, parse_bool
from trainops.debugger.config._save_config import SaveConfig

__all__ = [
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "Collection",
    "CollectionKeys",
    "CollectionManager",
]

_MAX_REGEX = MAX_PATTERN_CHARS
_MAX_REGEXES = MAX_PATTERNS
_MAX_NAMES = 100_000
_MAX_COLLECTIONS = 1_000


class CollectionKeys:
    """The built-in collection names (smdebug's ``CollectionKeys``)."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


SCALAR_COLLECTIONS = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
        CollectionKeys.SM_METRICS,
    }
)
NON_REDUCTION_COLLECTIONS = SCALAR_COLLECTIONS | {CollectionKeys.TENSORFLOW_SUMMARIES}
NON_HISTOGRAM_COLLECTIONS = NON_REDUCTION_COLLECTIONS


def _regexes(value: object) -> list[str]:
    if value is None or value is False:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Iterable):
        raise ValueError(f"include_regex must be a string or a list of strings, not {value!r}")
    out = list(items)
    if len(out) > _MAX_REGEXES:
        raise ValueError(f"include_regex has {len(out)} patterns, at most {_MAX_REGEXES}")
    for pattern in out:
        _check_regex(pattern)
    return out


def _check_regex(pattern: object) -> None:
    if not isinstance(pattern, str) or len(pattern) > _MAX_REGEX:
        raise ValueError(
            f"include_regex: {str(pattern)[:80]!r} is not a pattern of at most "
            f"{_MAX_REGEX} characters"
        )
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"include_regex: {pattern!r} is not a valid regex ({err})") from None


class Collection:
    """A named set of tensors (by name and by regex) with optional configs of its own."""

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | str | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | None = None,
        save_histogram: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a collection's name must be a non-empty string, not {name!r}")
        self.name = name
        self.include_regex: list[str] = _regexes(include_regex)
        self.tensor_names: set[str] = set(tensor_names or ())
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = parse_bool("save_histogram", save_histogram)
        self._compiled: list[re.Pattern[str]] = [re.compile(p) for p in self.include_regex]

    def include(self, regex: Iterable[str] | str) -> None:
        """Add patterns; a tensor whose name any of them matches belongs here."""
        for pattern in _regexes(regex):
            if pattern not in self.include_regex:
                self.include_regex.append(pattern)
                self._compiled.append(re.compile(pattern))

    def add_tensor_name(self, name: str) -> None:
        self.tensor_names.add(name)

    def has_tensor(self, name: str) -> bool:
        return name in self.tensor_names

    def matches(self, name: str) -> bool:
        """Whether ``name`` is in this collection, by name or by a regex match."""
        return name in self.tensor_names or any(p.match(name) for p in self._compiled)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": self.reduction_config.to_json_dict()
            if self.reduction_config
            else None,
            "save_config": self.save_config.to_json_dict() if self.save_config else None,
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any], *, untrusted: bool = False) -> Collection:
        """From the JSON form; ``untrusted`` (a job's file, read by someone else) also refuses
        patterns whose matching could blow up and more than 100,000 tensor names."""
        if not isinstance(params, Mapping):
            raise ValueError(f"a collection must be a mapping, not {type(params).__name__}")
        names = params.get("tensor_names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("a collection's tensor_names must be a list of strings")
        if untrusted and len(names) > _MAX_NAMES:
            raise ValueError(f"a collection lists {len(names)} tensor names, at most {_MAX_NAMES}")
        reduction, save = params.get("reduction_config"), params.get("save_config")
        collection = cls._build(params, names, reduction, save)
        for pattern in collection.include_regex if untrusted else ():
            try:
                check_untrusted_regex(pattern)
            except ValueError as err:
                raise ValueError(f"include_regex {err}") from None
        return collection

    @classmethod
    def _build(
        cls, params: Mapping[str, Any], names: list[str], reduction: Any, save: Any
    ) -> Collection:
        return cls(
            name=params.get("name"),  # type: ignore[arg-type]  # checked by the constructor
            include_regex=params.get("include_regex"),
            tensor_names=names,
            reduction_config=ReductionConfig.from_dict(reduction) if reduction else None,
            save_config=SaveConfig.from_dict(save) if save else None,
            save_histogram=params.get("save_histogram", True),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Collection({self.name!r}, include_regex={self.include_regex!r})"


class CollectionManager:
    """A job's collections by name, and how many workers write steps."""

    def __init__(self, collections: Iterable[Collection] = (), num_workers: int = 1) -> None:
        self.collections: dict[str, Collection] = {c.name: c for c in collections}
        self.num_workers = num_workers
        self.meta: dict[str, Any] = {}

    def get(self, name: str, create: bool = True) -> Collection:
        """The collection ``name``; a missing one is created unless ``create`` is false."""
        found = self.collections.get(name)
        if found is None:
            if not create:
                raise KeyError(f"no collection named {name!r}")
            found = self.collections[name] = Collection(name)
        return found

    def add(self, collection: Collection | str) -> Collection:
        if isinstance(collection, str):
            return self.get(collection)
        self.collections[collection.name] = collection
        return collection

    def get_collections(self) -> dict[str, Collection]:
        return self.collections

    def collections_of(self, tensor_name: str) -> list[Collection]:
        """Every collection that holds or matches ``tensor_name``."""
        return [c for c in self.collections.values() if c.matches(tensor_name)]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "collections": {n: c.to_json_dict() for n, c in sorted(self.collections.items())},
            "_meta": {**self.meta, "num_workers": self.num_workers},
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any], *, untrusted: bool = False) -> CollectionManager:
        """From the JSON form (``untrusted``: see :meth:`Collection.from_dict`; also at most
        1,000 collections)."""
        if not isinstance(params, Mapping) or not isinstance(params.get("collections"), Mapping):
            raise ValueError("a collections file must be an object with a 'collections' object")
        found = params["collections"]
        if untrusted and len(found) > _MAX_COLLECTIONS:
            raise ValueError(f"{len(found)} collections, at most {_MAX_COLLECTIONS}")
        meta = params.get("_meta") or {}
        if not isinstance(meta, Mapping):
            raise ValueError("a collections file's '_meta' must be an object")
        workers = meta.get("num_workers", 1)
        if (
            isinstance(workers, bool)
            or not isinstance(workers, int)
            or not 1 <= workers <= 1_000_000
        ):
            raise ValueError(f"_meta.num_workers must be an integer from 1, not {workers!r}")
        collections = (Collection.from_dict(c, untrusted=untrusted) for c in found.values())
        manager = cls(collections, num_workers=workers)
        manager.meta = {k: v for k, v in meta.items() if k != "num_workers"}
        return manager
