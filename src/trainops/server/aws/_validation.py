"""Validating a request body against the botocore service model, as the service does: required
members, types, string and list lengths, patterns, enums and number ranges, worded as AWS words
them ("1 validation error detected: Value 'x' at 'trainingJobName' failed to satisfy
constraint: Member must satisfy regular expression pattern: ...").

The model's patterns are Java regular expressions: each is translated (``\\p{...}`` classes)
and compiled once, from the model only; a user's value is only ever matched, in full
(Java's ``matches``), and only once its length is within the member's bounds, so no value longer
than the model allows reaches a pattern. A pattern Python cannot compile is not enforced.
One deliberate widening: where the model wants an S3 URI, a ``file://`` URI (trainops' local
object store) is accepted too.
"""

from __future__ import annotations

import functools
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botocore.model import Shape, StructureShape

from trainops.server.aws._errors import AwsError

__all__ = ["MAX_DEPTH", "validate"]

MAX_DEPTH = 32  # nesting of a request's objects and arrays (the model's deepest is far less)
_S3_URI = "(https|s3)://"  # how the model's S3 URI patterns begin
_JAVA_CLASSES = {
    r"\p{L}": r"\w",  # a little wider than Java's letters: the check fails open, never shut
    r"\p{N}": r"\d",
    r"\p{Z}": r"\s",
    r"\p{M}": r"\w",
}


def validate(body: Any, shape: StructureShape | None) -> None:
    """Raise the service's ValidationException listing every constraint ``body`` breaks."""
    if shape is None:
        return
    errors: list[str] = []
    _check(body, shape, "", errors, 0)
    if errors:
        count = len(errors)
        noun = "error" if count == 1 else "errors"
        raise AwsError(
            400, "ValidationException", f"{count} validation {noun} detected: " + "; ".join(errors)
        )


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _check(value: Any, shape: Shape, path: str, errors: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise AwsError(400, "SerializationException", "Request body is nested too deeply")
    kind = shape.type_name
    if kind == "structure":
        _structure(value, shape, path, errors, depth)
    elif kind == "list":
        _list(value, shape, path, errors, depth)
    elif kind == "map":
        _map(value, shape, path, errors, depth)
    elif kind == "string":
        _string(value, shape, path, errors)
    elif kind in ("integer", "long", "float", "double"):
        _number(value, shape, path, errors)
    elif kind == "boolean" and not isinstance(value, bool):
        raise _serialization(path, "a boolean")
    elif kind == "timestamp" and (
        isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    ):
        raise _serialization(path, "a timestamp (epoch seconds)")


def _serialization(path: str, wanted: str) -> AwsError:
    return AwsError(400, "SerializationException", f"'{path or 'body'}' must be {wanted}")


def _structure(value: Any, shape: Any, path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, dict):
        raise _serialization(path, "an object")
    prefix = f"{path}." if path else ""
    for name in shape.required_members:
        if value.get(name) is None:
            errors.append(_failure(None, prefix + _camel(name), "Member must not be null"))
    for name, member in value.items():
        if name in shape.members and member is not None:
            _check(member, shape.members[name], prefix + _camel(name), errors, depth + 1)


def _list(value: Any, shape: Any, path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, list):
        raise _serialization(path, "an array")
    if _length(value, shape, path, errors):
        for index, item in enumerate(value, 1):
            _check(item, shape.member, f"{path}.{index}.member", errors, depth + 1)


def _map(value: Any, shape: Any, path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, dict):
        raise _serialization(path, "an object")
    if _length(value, shape, path, errors):
        for key, item in value.items():
            _check(key, shape.key, path, errors, depth + 1)
            _check(item, shape.value, path, errors, depth + 1)


def _string(value: Any, shape: Shape, path: str, errors: list[str]) -> None:
    if not isinstance(value, str):
        raise _serialization(path, "a string")
    enum = shape.metadata.get("enum")
    if enum and value not in enum:
        errors.append(
            _failure(
                _shown(value), path, f"Member must satisfy enum value set: [{', '.join(enum)}]"
            )
        )
        return
    if not _length(value, shape, path, errors):
        return
    pattern = shape.metadata.get("pattern")
    compiled = _compiled(pattern) if pattern else None
    if compiled is not None and compiled.fullmatch(value) is None:
        errors.append(
            _failure(
                _shown(value),
                path,
                f"Member must satisfy regular expression pattern: {_anchored(pattern)}",
            )
        )


def _length(value: Any, shape: Shape, path: str, errors: list[str]) -> bool:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if high is not None and len(value) > high:
        message = f"Member must have length less than or equal to {high}"
    elif low is not None and len(value) < low:
        message = f"Member must have length greater than or equal to {low}"
    else:
        return True
    errors.append(_failure(_shown(value), path, message))
    return False


def _number(value: Any, shape: Shape, path: str, errors: list[str]) -> None:
    integral = shape.type_name in ("integer", "long")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _serialization(path, "a number")
    if (integral and not isinstance(value, int)) or not math.isfinite(value):
        raise _serialization(path, "an integer" if integral else "a finite number")
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if high is not None and value > high:
        errors.append(
            _failure(str(value), path, f"Member must have value less than or equal to {high}")
        )
    elif low is not None and value < low:
        errors.append(
            _failure(str(value), path, f"Member must have value greater than or equal to {low}")
        )


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= 256 else text[:256] + "..."


def _failure(value: str | None, path: str, constraint: str) -> str:
    shown = "null" if value is None else f"'{value}'"
    return f"Value {shown} at '{path}' failed to satisfy constraint: {constraint}"


def _anchored(pattern: str) -> str:
    """The pattern as the service quotes it: its models anchor what botocore's leave bare."""
    return pattern if pattern.startswith("^") else "^" + pattern


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """The model's Java pattern as a Python one, or None where it has no Python equivalent."""
    translated = pattern
    for java, python in _JAVA_CLASSES.items():
        translated = translated.replace(java, python)
    if translated.lstrip("^").startswith(_S3_URI):
        translated = f"(?:{translated})|file:///.*"  # a local store where the API wants S3
    try:
        return re.compile(translated, re.DOTALL)
    except re.error:
        return None
