"""What the hook saves of a tensor: reductions (min, max, mean, ...), norms, and/or the raw tensor.

:class:`ReductionConfig` takes smdebug's arguments; its JSON form (and the API's
``reductions`` parameter) is one comma list where ``abs_`` marks an absolute reduction and
``_norm`` a norm: ``"min,abs_max,l2_norm,abs_l1_norm"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ALLOWED_NORMS", "ALLOWED_REDUCTIONS", "ReductionConfig", "parse_bool"]

ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")
_MAX_ITEMS = 64


def parse_bool(name: str, value: object) -> bool:
    """A bool, or the strings the API sends (``"true"``/``"false"``, any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _names(field: str, values: Iterable[str], allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValueError(f"{field} must be a list, not the string {values!r}")
    out = tuple(values)
    if len(out) > _MAX_ITEMS:
        raise ValueError(f"{field} has {len(out)} entries, at most {_MAX_ITEMS}")
    for name in out:
        if name not in allowed:
            raise ValueError(f"{field}: {name!r} is not one of {', '.join(allowed)}")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class ReductionConfig:
    """Reductions and norms of a tensor, plain and absolute, and whether to keep it whole."""

    reductions: tuple[str, ...] = ()
    abs_reductions: tuple[str, ...] = ()
    norms: tuple[str, ...] = ()
    abs_norms: tuple[str, ...] = ()
    save_raw_tensor: bool = False
    save_shape: bool = False

    def __init__(
        self,
        reductions: Iterable[str] = (),
        abs_reductions: Iterable[str] = (),
        norms: Iterable[str] = (),
        abs_norms: Iterable[str] = (),
        save_raw_tensor: bool = False,
        save_shape: bool = False,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "reductions", _names("reductions", reductions, ALLOWED_REDUCTIONS))
        set_(self, "abs_reductions", _names("abs_reductions", abs_reductions, ALLOWED_REDUCTIONS))
        set_(self, "norms", _names("norms", norms, ALLOWED_NORMS))
        set_(self, "abs_norms", _names("abs_norms", abs_norms, ALLOWED_NORMS))
        set_(self, "save_raw_tensor", parse_bool("save_raw_tensor", save_raw_tensor))
        set_(self, "save_shape", parse_bool("save_shape", save_shape))

    @property
    def reduction_list(self) -> tuple[tuple[str, bool], ...]:
        """Every ``(reduction or norm, abs)`` pair to compute, in the JSON list's order."""
        return (
            *((name, False) for name in self.reductions),
            *((name, False) for name in self.norms),
            *((name, True) for name in self.abs_reductions),
            *((name, True) for name in self.abs_norms),
        )

    def to_json_dict(self) -> dict[str, Any]:
        items = [
            *self.reductions,
            *(f"{name}_norm" for name in self.norms),
            *(f"abs_{name}" for name in self.abs_reductions),
            *(f"abs_{name}_norm" for name in self.abs_norms),
        ]
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": ",".join(items),
            "save_shape": self.save_shape,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> ReductionConfig:
        """From the JSON/API form: ``reductions`` as one comma list, ``save_raw_tensor``."""
        if not isinstance(params, Mapping):
            raise ValueError(f"a reduction config must be a mapping, not {type(params).__name__}")
        listed = params.get("reductions", "") or ""
        if not isinstance(listed, str):
            listed = ",".join(str(item) for item in listed)
        buckets: dict[str, list[str]] = {"reductions": [], "abs_reductions": []}
        buckets |= {"norms": [], "abs_norms": []}
        for item in (part.strip() for part in listed.split(",")):
            if item:
                _sort_item(item, buckets)
        return cls(
            **buckets,
            save_raw_tensor=params.get("save_raw_tensor", False),
            save_shape=params.get("save_shape", False),
        )


def _sort_item(item: str, buckets: dict[str, list[str]]) -> None:
    absolute = item.startswith("abs_")
    name = item[4:] if absolute else item
    norm = name.endswith("_norm")
    name = name[: -len("_norm")] if norm else name
    key = ("abs_" if absolute else "") + ("norms" if norm else "reductions")
    if name not in (ALLOWED_NORMS if norm else ALLOWED_REDUCTIONS):
        allowed = [*ALLOWED_REDUCTIONS, *(f"{norm_}_norm" for norm_ in ALLOWED_NORMS)]
        raise ValueError(
            f"reductions: {item!r} is not one of {', '.join(allowed)} (or abs_ of one)"
        )
    buckets[key].append(name)
