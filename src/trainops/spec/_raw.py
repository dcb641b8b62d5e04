"""A job spec as plain data: read from YAML, local paths resolved, ready for a server to validate.

``trainops run`` and ``trainops submit`` send this to the server, which validates it with the
spec's models anyway; the client then never imports pydantic, which would cost more than a whole
warm submission. Only the fields the client itself relies on (names, paths, the entry point) are
checked here, and only for shape. :meth:`RawSpec.validate` gives the full local validation (what
:func:`~trainops.spec.load_spec` does) for when a check fails or no server exists yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from trainops._errors import SpecError
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_lines
from trainops.spec._names import base_name_for, is_job_name
from trainops.spec._sources import raw_source_problems
from trainops.storage import STORES

if TYPE_CHECKING:
    from trainops.spec._job import JobSpec

__all__ = [
    "RawSpec",
    "as_uri",
    "code_problems",
    "custom_rule_problems",
    "load_raw_spec",
    "uri_problem",
]

Problems = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class RawSpec:
    """A spec file's fields (local paths resolved), the line of each, and what is wrong locally.

    ``sendable`` is true when every field the client uses is well-formed, the code exists and
    every value is plain JSON: the server's validation then has the last word, and its problems
    are mapped to lines with :meth:`error`. Otherwise :meth:`validate` says what is wrong.
    """

    data: dict[str, Any]
    lines: dict[str, int]
    source: str | None
    base_dir: Path
    path_problems: tuple[tuple[str, str], ...] = ()

    @property
    def sendable(self) -> bool:
        return not self.path_problems and _well_formed(self.data) and _plain_json(self.data)

    @property
    def job_name(self) -> str | None:
        name = self.data.get("job_name")
        return name if isinstance(name, str) else None

    @property
    def base_job_name(self) -> str:
        """The base of a generated name (as :func:`~trainops.spec.base_job_name` makes it)."""
        return base_name_for(self.data.get("base_job_name"), self.data.get("entry_point"))

    @property
    def output_path(self) -> str | None:
        value = self.data.get("output_path")
        return value if isinstance(value, str) else None

    @property
    def source_dir(self) -> str | None:
        value = self.data.get("source_dir")
        return value if isinstance(value, str) else None

    @property
    def entry_point(self) -> str:
        return str(self.data.get("entry_point", ""))

    def validate(self) -> JobSpec:
        """The spec validated locally (imports the models); raises :class:`SpecError` as
        :func:`~trainops.spec.load_spec` does: invalid fields first, then missing code."""
        from trainops.spec._load import validate_spec

        spec = validate_spec(self.data, self.lines, self.source)
        if self.path_problems:
            raise SpecError(list(self.path_problems), self.source)
        return spec

    def check_sources(self) -> None:
        """Raise a :class:`SpecError` (with lines) naming every local channel source that is
        missing or empty: checked at submission, before anything is created (``s3://`` sources
        are checked by the hosts when they download them). Where the spec has problems of its
        own as well, those are raised instead: they come first, as they always have."""
        problems = raw_source_problems(self.data)
        if problems:
            self.validate()
            raise self.error(problems)

    def check(self) -> JobSpec:
        """Everything a submission checks locally: :meth:`validate`, then the channel sources."""
        spec = self.validate()
        self.check_sources()
        return spec

    def error(self, problems: Problems) -> SpecError:
        """A :class:`SpecError` about this file from ``(field path, reason)`` pairs (a server's)."""
        return with_lines(problems, self.lines, self.source)


def load_raw_spec(path: str | Path) -> RawSpec:
    """Read the YAML spec at ``path``; local paths are resolved against its folder.

    YAML that is not a mapping of fields is a :class:`SpecError` at once; everything else is
    left to :attr:`RawSpec.sendable` and :meth:`RawSpec.validate`.
    """
    path = Path(path)
    source = str(path)
    text = read_spec_text(path)
    data, lines = read_spec_yaml(text, source)
    base_dir = path.resolve().parent
    resolved, problems = _resolve(data, base_dir)
    return RawSpec(resolved, lines, source, base_dir, tuple(problems))


def uri_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable location (s3://, file:// or a local path), or None."""
    if not value.strip():
        return "must not be empty"
    if "\x00" in value:
        return "must not contain a NUL character"
    scheme, sep, _ = value.partition("://")
    if sep and scheme not in STORES:
        known = ", ".join(f"{name}://" for name in STORES.names())
        return f"scheme {scheme!r} is not supported; use {known} or a local path"
    if sep and scheme == "s3" and not value[len("s3://") :].split("/")[0]:
        return "s3 URI needs a bucket, e.g. s3://bucket/prefix/"
    return None


def as_uri(value: str, base_dir: Path) -> str:
    """A local path as an absolute ``file://`` URI (relative to ``base_dir``); URIs unchanged
    (and a value with a NUL character, which the spec's validation refuses).

    The path is written as it is, not percent-encoded (``Path.as_uri`` would write a space as
    ``%20``): the file store reads the rest of a ``file://`` URI as a plain path.
    """
    if "://" in value or "\x00" in value:
        return value
    uri = f"file://{(base_dir / value).resolve().as_posix()}"
    return uri + "/" if value.endswith("/") else uri


def code_problems(
    source_dir: str | None, entry_point: str, base_dir: Path
) -> tuple[str | None, Problems]:
    """The absolute local ``source_dir`` (if any) and what is missing of the code."""
    for field, value in (("source_dir", source_dir), ("entry_point", entry_point)):
        if value is not None and "\x00" in value:
            return source_dir, [(field, "must not contain a NUL character")]
    if source_dir is not None and "://" in source_dir:
        return source_dir, []
    if source_dir is None:
        entry = (base_dir / entry_point).resolve()
        if not entry.is_file():
            return None, [("entry_point", f"{entry} not found (and no source_dir given)")]
        return None, []
    resolved = (base_dir / source_dir).resolve()
    if not resolved.is_dir():
        return str(resolved), [("source_dir", f"{resolved} is not a directory")]
    if not (resolved / entry_point).is_file():
        return str(resolved), [("entry_point", f"{entry_point} not found in {resolved}")]
    return str(resolved), []


def custom_rule_problems(rules: Any, source_dir: str | None) -> Problems:
    """What is missing of the custom rules' files: each ``source`` must be a file of the local
    ``source_dir`` (resolved), which is packed with the job; a remote ``source_dir`` is checked
    when the rule starts."""
    listed = [rules] if isinstance(rules, dict) else rules if isinstance(rules, list) else []
    problems: Problems = []
    for index, rule in enumerate(listed):
        source = rule.get("source") if isinstance(rule, dict) else getattr(rule, "source", None)
        if not isinstance(source, str) or not _entry_point_ok(source) or "\x00" in source:
            continue  # none, or malformed: the spec's own check says so
        field = f"rules.{index}.source"
        if source_dir is None:
            problems.append((field, "a custom rule's file is packed with source_dir: give one"))
        elif "://" not in source_dir and not (Path(source_dir) / source).is_file():
            problems.append((field, f"{source} not found in {source_dir}"))
    return problems


def _resolve(data: dict[str, Any], base_dir: Path) -> tuple[dict[str, Any], Problems]:
    """``data`` with its well-formed local paths resolved, and what is missing of the code."""
    out = dict(data)
    problems: Problems = []
    source_dir = data.get("source_dir")
    if _entry_point_ok(data.get("entry_point")) and (source_dir is None or _text(source_dir)):
        resolved_dir, problems = code_problems(source_dir, data["entry_point"], base_dir)
        if resolved_dir is not None:
            out["source_dir"] = resolved_dir
        if not problems:
            problems = custom_rule_problems(data.get("rules"), resolved_dir)
    if _location(data.get("output_path")):
        out["output_path"] = as_uri(data["output_path"], base_dir)
    checkpoint = data.get("checkpoint")
    if isinstance(checkpoint, dict) and _location(checkpoint.get("uri")):
        out["checkpoint"] = {**checkpoint, "uri": as_uri(checkpoint["uri"], base_dir)}
    if "inputs" in data:
        out["inputs"] = _resolve_inputs(data["inputs"], base_dir)
    return out, problems


def _resolve_inputs(inputs: Any, base_dir: Path) -> Any:
    """Channels as the spec allows them: one URI, a URI per channel, or a mapping per channel."""
    if _location(inputs):
        return as_uri(inputs, base_dir)
    if not isinstance(inputs, dict):
        return inputs
    out: dict[Any, Any] = {}
    for name, channel in inputs.items():
        if _location(channel):
            channel = as_uri(channel, base_dir)
        elif isinstance(channel, dict) and _location(channel.get("uri")):
            channel = {**channel, "uri": as_uri(channel["uri"], base_dir)}
        out[name] = channel
    return out


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _location(value: Any) -> bool:
    return isinstance(value, str) and uri_problem(value) is None


def _entry_point_ok(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    path = PurePath(value)
    return not path.is_absolute() and ".." not in path.parts


def _well_formed(data: dict[str, Any]) -> bool:
    """Whether the fields the client uses to name, pack and place the job have their shape."""
    job_name = data.get("job_name")
    output_path = data.get("output_path")
    source_dir = data.get("source_dir")
    return (
        _entry_point_ok(data.get("entry_point"))
        and (source_dir is None or _text(source_dir))
        and (job_name is None or (_text(job_name) and is_job_name(job_name)))
        and (output_path is None or _location(output_path))
    )


def _plain_json(value: Any) -> bool:
    """Whether ``value`` survives JSON unchanged: text keys, finite numbers, no other types."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)
