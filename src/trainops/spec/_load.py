"""Reading a job spec from YAML and resolving its local paths before submission.

Errors name the field path and, for YAML files, the line it is on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainops._errors import SpecError
from trainops.spec._job import JobSpec
from trainops.spec._yaml import RefusedYAML, load_yaml

__all__ = ["load_spec", "parse_spec", "resolve_paths"]


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate the YAML job spec at ``path``; local paths are resolved against its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([("", f"cannot read file: {exc.strerror}")], source=str(path)) from None
    spec = parse_spec(text, source=str(path))
    return resolve_paths(spec, path.resolve().parent, source=str(path))


def parse_spec(text: str, source: str | None = None) -> JobSpec:
    """Validate YAML ``text``; problems carry the line of the field they are about."""
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
        raise SpecError(
            [("", "the spec must be a mapping of fields, e.g. 'entry_point: train.py'")], source
        )
    lines = _line_index(node)
    try:
        return JobSpec(**data)
    except SpecError as exc:
        raise SpecError([(_with_line(p, lines), r) for p, r in exc.problems], source) from None


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


def resolve_paths(spec: JobSpec, base_dir: Path, source: str | None = None) -> JobSpec:
    """Make local paths absolute (``file://`` for URIs) and check that the code exists."""
    problems: list[tuple[str, str]] = []
    update: dict[str, Any] = {}
    if spec.source_dir is not None and "://" not in spec.source_dir:
        source_dir = (base_dir / spec.source_dir).resolve()
        if not source_dir.is_dir():
            problems.append(("source_dir", f"{source_dir} is not a directory"))
        elif not (source_dir / spec.entry_point).is_file():
            problems.append(("entry_point", f"{spec.entry_point} not found in {source_dir}"))
        update["source_dir"] = str(source_dir)
    elif spec.source_dir is None:
        entry = (base_dir / spec.entry_point).resolve()
        if not entry.is_file():
            problems.append(("entry_point", f"{entry} not found (and no source_dir given)"))
    if problems:
        raise SpecError(problems, source)
    update["inputs"] = {
        name: ch.model_copy(update={"uri": _as_uri(ch.uri, base_dir)})
        for name, ch in spec.inputs.items()
    }
    if spec.output_path is not None:
        update["output_path"] = _as_uri(spec.output_path, base_dir)
    if spec.checkpoint is not None:
        update["checkpoint"] = spec.checkpoint.model_copy(
            update={"uri": _as_uri(spec.checkpoint.uri, base_dir)}
        )
    return spec.model_copy(update=update)


def _as_uri(value: str, base_dir: Path) -> str:
    if "://" in value:
        return value
    uri = (base_dir / value).resolve().as_uri()
    return uri + "/" if value.endswith("/") else uri


def _line_index(node: yaml.Node | None) -> dict[str, int]:
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


def _with_line(path: str, lines: dict[str, int]) -> str:
    probe = path
    while probe:
        if probe in lines:
            return f"{path} (line {lines[probe]})"
        probe = probe.rpartition(".")[0]
    return path
