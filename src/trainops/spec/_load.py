"""Reading a job spec from YAML and resolving its local paths before submission.

Errors name the field path and, for YAML files, the line it is on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops._errors import SpecError
from trainops.spec._job import Channel, JobSpec
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_lines
from trainops.spec._raw import as_uri, code_problems, custom_rule_problems
from trainops.spec._sources import spec_source_problems

__all__ = ["check_channel_sources", "load_spec", "parse_spec", "resolve_paths", "validate_spec"]


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate the YAML job spec at ``path``; local paths are resolved against its folder."""
    path = Path(path)
    text = read_spec_text(path)
    spec = parse_spec(text, source=str(path))
    return resolve_paths(spec, path.resolve().parent, source=str(path))


def parse_spec(text: str, source: str | None = None) -> JobSpec:
    """Validate YAML ``text``; problems carry the line of the field they are about."""
    data, lines = read_spec_yaml(text, source)
    return validate_spec(data, lines, source)


def validate_spec(
    data: dict[str, Any], lines: dict[str, int] | None = None, source: str | None = None
) -> JobSpec:
    """``data`` (a spec's fields) as a :class:`JobSpec`; problems carry their ``lines``."""
    try:
        return JobSpec(**data)
    except SpecError as exc:
        raise with_lines(exc.problems, lines or {}, source) from None


def resolve_paths(spec: JobSpec, base_dir: Path, source: str | None = None) -> JobSpec:
    """Make local paths absolute (``file://`` for URIs) and check that the code exists."""
    update: dict[str, Any] = {}
    source_dir, problems = code_problems(spec.source_dir, spec.entry_point, base_dir)
    problems = problems or custom_rule_problems(spec.rules, source_dir)
    if problems:
        raise SpecError(problems, source)
    if source_dir is not None:
        update["source_dir"] = source_dir
    update["inputs"] = {name: _resolve_channel(ch, base_dir) for name, ch in spec.inputs.items()}
    if spec.output_path is not None:
        update["output_path"] = as_uri(spec.output_path, base_dir)
    if spec.checkpoint is not None:
        update["checkpoint"] = spec.checkpoint.model_copy(
            update={"uri": as_uri(spec.checkpoint.uri, base_dir)}
        )
    for name in ("profiler_config", "tensorboard_output_config", "debugger_hook_config"):
        config = getattr(spec, name)
        if config is not None and config.s3_output_path is not None:
            uri = as_uri(config.s3_output_path, base_dir)
            update[name] = config.model_copy(update={"s3_output_path": uri})
    return spec.model_copy(update=update)


def check_channel_sources(spec: JobSpec, source: str | None = None) -> None:
    """Raise a :class:`SpecError` naming every local (``file://``) channel source of ``spec``
    (paths resolved) that does not exist or holds no files: what submission checks before it
    creates anything. ``s3://`` sources are checked when the hosts download them."""
    problems = spec_source_problems(spec)
    if problems:
        raise SpecError(problems, source)


def _resolve_channel(channel: Channel, base_dir: Path) -> Channel:
    """A channel's uri as an absolute URI, and a file-system directory as an absolute path."""
    if channel.uri is not None:
        return channel.model_copy(update={"uri": as_uri(channel.uri, base_dir)})
    fs = channel.file_system
    if fs is None or Path(fs.directory_path).is_absolute():
        return channel
    path = str((base_dir / fs.directory_path).resolve())
    return channel.model_copy(
        update={"file_system": fs.model_copy(update={"directory_path": path})}
    )
