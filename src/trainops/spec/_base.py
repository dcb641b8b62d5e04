"""The base model of every spec class: strict, immutable, and failing with a :class:`SpecError`.

Pydantic's ``ValidationError`` is turned into ``(field path, reason)`` pairs here, so a user of the
Python API gets the same message as a user of a YAML file.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from trainops._errors import SpecError
from trainops.spec._sagemaker import sagemaker_hint

__all__ = ["FieldValueError", "SpecModel", "problems_from"]


class FieldValueError(ValueError):
    """A model check's problem with one of the model's fields: reported at that field's path
    (``ranges.lr.min_value``, not ``ranges.lr``), so a YAML file's refusal names its line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class SpecModel(BaseModel):
    """Frozen, extra-forbidding model that raises :class:`SpecError` on bad input."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    # SageMaker SDK arguments a porting user may write here, with what to do instead.
    sdk_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise SpecError(problems_from(exc, type(self))) from None

    # Tell pydantic this __init__ only wraps the base one, so nested models are validated by
    # pydantic-core directly and their errors keep their full location.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def problems_from(exc: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """Turn a pydantic error into ``(dotted path, reason)`` pairs a person can act on."""
    problems = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldValueError):
            loc.append(cause.field)
        path = ".".join(loc)
        if err["type"] == "extra_forbidden":
            reason = _unknown_field(model, loc)
        else:
            reason = _clean(str(err["msg"]))
        problems.append((path, reason))
    return problems


def _clean(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def _unknown_field(model: type[BaseModel], loc: list[str]) -> str:
    found = _model_at(model, loc[:-1])
    if found is None:
        return "unknown field"
    if issubclass(found, SpecModel):
        hint = sagemaker_hint(found.sdk_arguments, loc[-1])
        if hint is not None:
            return hint
    fields = list(found.model_fields)
    close = difflib.get_close_matches(loc[-1], fields, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown field; {hint}known fields: {', '.join(sorted(fields))}"


def _model_at(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """The model reached by following ``path`` (dict keys, list indexes skipped)."""
    current: type[BaseModel] | None = model
    parts = iter(path)
    for part in parts:
        if current is None:
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        if getattr(field.annotation, "__origin__", None) in (dict, list):
            next(parts, None)
        current = _model_in(field.annotation)
    return current


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
