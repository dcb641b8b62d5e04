"""The one reader every component's settings go through: environment first, then config.yaml.

A :class:`SettingsSource` holds the process environment and ``$TRAINOPS_HOME/config.yaml``.
Each component reads the keys it owns from it (its ``read`` classmethod), and the reader keeps
the rules the same for all of them:

- an environment variable that is set and not empty wins over the config.yaml key; a list
  variable that is set but empty is an empty list (so the environment can clear a list);
- a bad value is refused with one line that names where it came from: ``environment variable
  TRAINOPS_LOCAL_CPUS: …`` or ``/home/me/.trainops/config.yaml local.cpus: …``;
- errors show what was wrong with a value (its type, a short excerpt), never a whole value of
  unbounded size, and never the value of a secret;
- every key a component reads is recorded, so that :meth:`SettingsSource.refuse_unknown` can
  refuse a key nobody reads (a typo that would otherwise be silently ignored), naming the keys
  that are read there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainops._errors import ConfigError

__all__ = ["SettingsSource"]

_YES = frozenset({"true", "yes", "on"})
_NO = frozenset({"false", "no", "off"})
_SHOWN = 80  # characters of a bad value shown in an error


class SettingsSource:
    """The environment and one level of config.yaml (the top, or a section such as ``ray:``)."""

    def __init__(
        self,
        env: Mapping[str, str],
        config: Mapping[Any, Any],
        path: Path,
        section: str = "",
        read: dict[str, set[str]] | None = None,
        variables: set[str] | None = None,
    ) -> None:
        self.env = env
        self.path = path
        self.section = section
        self._config = config
        self._read: dict[str, set[str]] = {} if read is None else read
        self._read.setdefault(section, set())
        self._variables: set[str] = set() if variables is None else variables

    @classmethod
    def open(cls, env: Mapping[str, str], path: Path) -> SettingsSource:
        """The environment and ``path`` (a config.yaml; a missing file is an empty one)."""
        return cls(env, _read_config_file(path), path)

    def within(self, section: str) -> SettingsSource:
        """The keys under ``section:`` (absent or empty: none)."""
        self._note(section)
        value = self._config.get(section)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{self.origin(section)}: expected a mapping of settings "
                f"({section}: followed by indented keys), got {_kind(value)}"
            )
        dotted = self._dotted(section)
        return SettingsSource(self.env, value, self.path, dotted, self._read, self._variables)

    def text(self, key: str, *variables: str) -> str | None:
        """A string from the first of ``variables`` that is set and not empty, else ``key``."""
        variable, value = self._lookup(key, variables)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Mapping | list):
            raise ConfigError(f"{self.origin(key, variable)}: expected text, got {_kind(value)}")
        return str(value)

    def whole_number(
        self, key: str, *variables: str, minimum: int = 0, label: str = "", unit: str = ""
    ) -> int | None:
        """A whole number of at least ``minimum`` (``label`` and ``unit`` word the refusal)."""
        variable, value = self._lookup(key, variables)
        if value is None:
            return None
        number = _whole_number(value)
        if number is None:
            raise ConfigError(
                f"{self.origin(key, variable)}: expected a whole number, got {_shown(value)}"
            )
        if number < minimum:
            what = f"{label} must" if label else "must"
            bound = "not be negative" if minimum == 0 else f"be at least {minimum}{unit}"
            raise ConfigError(f"{self.origin(key, variable)}: {what} {bound}, got {number}{unit}")
        return number

    def flag(self, key: str, *variables: str) -> bool | None:
        """``true``/``false`` (also yes/no, on/off, and whole numbers: 0 is false)."""
        variable, value = self._lookup(key, variables)
        if value is None or isinstance(value, bool):
            return value
        number = _whole_number(value)
        if number is not None:
            return number != 0
        word = value.strip().lower() if isinstance(value, str) else None
        if word in _YES or word in _NO:
            return word in _YES
        raise ConfigError(
            f"{self.origin(key, variable)}: must be true or false, not {_shown(value)}"
        )

    def choice(self, key: str, *variables: str, choices: tuple[str, ...]) -> str | None:
        """One of ``choices``."""
        variable, value = self._lookup(key, variables)
        if value is None:
            return None
        if value in choices:
            return str(value)
        raise ConfigError(
            f"{self.origin(key, variable)}: {self._dotted(key)} must be one of "
            f"{', '.join(choices)}, not {_shown(value)}"
        )

    def names(self, key: str, variable: str, *, noun: str) -> tuple[str, ...] | None:
        """A list: ``variable`` split at commas (set but empty: none), else a YAML list (or one
        string) under ``key``; entries are stripped and empty ones dropped."""
        self._note(key, variable)
        raw = self.env.get(variable)
        if raw is not None:
            return tuple(n.strip() for n in raw.split(",") if n.strip())
        value = self._config.get(key)
        if value is None:
            return None
        entries = [value] if isinstance(value, str) else value
        if not isinstance(entries, list) or not all(isinstance(n, str) for n in entries):
            raise ConfigError(f"{self.origin(key)}: expected a list of {noun}, got {_kind(value)}")
        return tuple(n.strip() for n in entries if n.strip())

    def error(self, key: str, *variables: str, problem: str) -> ConfigError:
        """An error about ``key``'s value, naming the place it was read from."""
        variable = next((v for v in variables if self.env.get(v)), None)
        return ConfigError(f"{self.origin(key, variable)}: {problem}")

    def entry_error(self, key: str, variable: str, entry: str, problem: str) -> ConfigError:
        """An error about one entry of the list ``key`` (its variable's, when that is set)."""
        where = f"environment variable {variable}" if variable in self.env else str(self.path)
        return ConfigError(f"{where}: {self._dotted(key)} entry {_shown(entry)} {problem}")

    def origin(self, key: str, variable: str | None = None) -> str:
        """Where a value was read: its environment variable, or config.yaml and its key."""
        if variable is not None:
            return f"environment variable {variable}"
        return f"{self.path} {self._dotted(key)}"

    def refuse_unknown(self) -> None:
        """Refuse a config.yaml key that no component read, at any level that was read (call
        it on the top-level source, once every component has read its keys)."""
        for section, known in self._read.items():
            mapping = self._section(section) if section else self._config
            unknown = sorted(str(k) for k in mapping if str(k) not in known)
            if unknown:
                where = f"{self.path} {section}".rstrip()
                named = ", ".join(_shown_key(k) for k in unknown[:5])
                more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
                raise ConfigError(
                    f"{where}: unknown key(s) {named}{more}"
                    f"{_suggestion(unknown[0], known)}; known: {', '.join(sorted(known))}"
                )

    def consulted(self) -> tuple[set[str], set[str]]:
        """Every config.yaml key (dotted) and environment variable read so far."""
        keys = {f"{s}.{k}" if s else k for s, known in self._read.items() for k in known}
        return keys, set(self._variables)

    def _lookup(self, key: str, variables: tuple[str, ...]) -> tuple[str | None, Any]:
        self._note(key, *variables)
        for variable in variables:
            value = self.env.get(variable)
            if value:
                return variable, value
        value = self._config.get(key)
        return None, None if value == "" else value

    def _note(self, key: str, *variables: str) -> None:
        self._read[self.section].add(key)
        self._variables.update(variables)

    def _dotted(self, key: str) -> str:
        return f"{self.section}.{key}" if self.section else key

    def _section(self, dotted: str) -> Mapping[Any, Any]:
        mapping: Any = self._config
        for part in dotted.split("."):
            mapping = mapping.get(part) or {}
        return mapping if isinstance(mapping, Mapping) else {}


def _read_config_file(path: Path) -> dict[Any, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    import yaml  # only when there is a config file: most commands run without one

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML{_yaml_where(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {_kind(data)}")
    return data


def _yaml_where(exc: Exception) -> str:
    """Line, column and problem of a YAML error, on one line (never the file's text)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{where}: {problem}" if problem else where


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return type(value).__name__


def _shown(value: object) -> str:
    """A short excerpt of a bad (non-secret) value."""
    if isinstance(value, Mapping | list):
        return _kind(value)
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _shown_key(key: str) -> str:
    """A key as written when it is short and printable, else a short excerpt of its repr."""
    return key if len(key) <= _SHOWN and key.isprintable() else _shown(key)


def _suggestion(unknown: str, known: set[str]) -> str:
    import difflib  # only on the way to an error

    close = difflib.get_close_matches(unknown, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
