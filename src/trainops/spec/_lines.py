"""Reading a spec's YAML into plain data, with the line of every field for error messages.

Nothing here needs the spec's pydantic models, so a client can read a spec, send it to a server
that validates it, and still point each problem the server finds at its line in the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainops._errors import SpecError
from trainops.spec._yaml import RefusedYAML, load_yaml

__all__ = ["line_index", "read_spec_text", "read_spec_yaml", "with_line", "with_lines"]


def read_spec_text(path: Path) -> str:
    """The text of the spec file at ``path``: a :class:`SpecError` if it cannot be read or is
    not UTF-8 (saying at which byte and line)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError([("", f"cannot read file: {exc.strerror}")], source=str(path)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        byte = raw[exc.start]
        problem = f"line {line}: not UTF-8 text (byte 0x{byte:02x} at byte offset {exc.start})"
        raise SpecError([("", problem)], source=str(path)) from None


_SPEC_MAPPING = "the spec must be a mapping of fields, e.g. 'entry_point: train.py'"


def read_spec_yaml(
    text: str, source: str | None = None, not_a_mapping: str = _SPEC_MAPPING
) -> tuple[dict[str, Any], dict[str, int]]:
    """``(data, lines)`` of YAML ``text``: the fields and the line of each field path.

    Anything that is not a YAML mapping of fields named by text is a :class:`SpecError` (with
    its line); ``not_a_mapping`` is what a document of another shape is told.
    """
    try:
        node, data = load_yaml(text)
    except RefusedYAML as exc:
        if exc.path and exc.problem_mark is not None:
            field = f"{exc.path} (line {exc.problem_mark.line + 1})"
            raise SpecError([(field, str(exc.problem))], source) from None
        raise SpecError([("", f"{_where(exc)}{exc.problem}")], source) from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", exc)
        raise SpecError([("", f"{_where(exc)}not valid YAML ({problem})")], source) from None
    except RecursionError:
        raise SpecError([("", "not valid YAML (nested too deeply)")], source) from None
    if not isinstance(data, dict):
        raise SpecError([("", not_a_mapping)], source)
    lines = line_index(node)
    named = [key for key in data if not isinstance(key, str)]
    if named:
        problems = [
            (f"{key} (line {lines[str(key)]})" if str(key) in lines else str(key),
             f"a field name must be text, not {type(key).__name__} {key!r}")
            for key in named
        ]  # fmt: skip
        raise SpecError(problems, source)
    return data, lines


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


def line_index(node: yaml.Node | None) -> dict[str, int]:
    """Map dotted field paths to 1-based line numbers in the YAML source."""
    index: dict[str, int] = {}

    def walk(current: yaml.Node, prefix: str) -> None:
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                path = f"{prefix}.{key.value}" if prefix else str(key.value)
                index[path] = key.start_mark.line + 1
                walk(value, path)
        elif isinstance(current, yaml.SequenceNode):
            for i, item in enumerate(current.value):
                path = f"{prefix}.{i}"
                index[path] = item.start_mark.line + 1
                walk(item, path)

    if node is not None:
        walk(node, "")
    return index


def with_line(path: str, lines: dict[str, int]) -> str:
    """``path (line N)`` for the innermost field of ``path`` the file has; ``path`` otherwise."""
    probe = path
    while probe:
        if probe in lines:
            return f"{path} (line {lines[probe]})"
        probe = probe.rpartition(".")[0]
    return path


def with_lines(
    problems: list[tuple[str, str]], lines: dict[str, int], source: str | None
) -> SpecError:
    """A :class:`SpecError` about ``source`` whose field paths carry their lines."""
    return SpecError([(with_line(path, lines), reason) for path, reason in problems], source)
