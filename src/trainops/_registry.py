"""The one way trainops keeps a table of implementations: :class:`Registry`, name -> item.

Every seam with several implementations (backends, storage schemes, launchers, channel kinds,
sidecars, services, rules, action kinds, shard sources, pack and record formats) holds its
implementations in a ``Registry``: the built-in ones are registered where the table is made,
an optional extra (Ray, S3) as a lazy ``"module:attr"`` entry that is imported on first lookup,
and code above the seam (a plugin, a test) adds its own with :meth:`Registry.register`, also as
a decorator. Everything else reads the table: the CLI's choices, the spec's checks and each
seam's conformance suite, which is parametrized over :meth:`Registry.names`, so a newly
registered implementation is tested without touching the suite.

A name that is not registered is refused by :meth:`Registry.lookup` with one line naming what
was asked for and every name that is known, raised as the seam's own error class.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar, cast, overload

__all__ = ["Registry"]

T = TypeVar("T")
_SHOWN_CHARS = 80
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class _Lazy:
    """A ``"module:attr"`` entry not imported yet."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target


class Registry(Mapping[str, T], Generic[T]):
    """An ordered name -> item table of one seam's implementations.

    ``what`` names an item in messages (``"backend"``, ``"storage scheme"``); ``error`` makes the
    exception an unknown name raises (the seam's own error class); ``shown`` writes a name in the
    list of known ones (``"s3"`` as ``"s3://"``). Iteration, ``in`` and :meth:`names` never
    import a lazy entry; reading an item (``[]``, :meth:`lookup`, ``values()``) does.
    """

    def __init__(
        self,
        what: str,
        *,
        error: Callable[[str], Exception] = LookupError,
        shown: Callable[[str], str] = str,
    ) -> None:
        self.what = what
        self._error = error
        self._shown = shown
        self._items: dict[str, T | _Lazy] = {}
        self._targets: dict[str, str] = {}  # lazy entries already imported: name -> target

    # --- adding -------------------------------------------------------------------------------

    @overload
    def register(self, name: str, item: T, *, replace: bool = False) -> T: ...

    @overload
    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]: ...

    def register(
        self, name: str, item: T | None = None, *, replace: bool = False
    ) -> T | Callable[[T], T]:
        """Add ``item`` as ``name`` and return it; without ``item``, a decorator that does.

        A name registered twice is a programming error unless it is the same item again
        (importing a module twice) or ``replace`` is set.
        """
        if item is None:

            def decorate(given: T) -> T:
                self._add(name, given, replace)
                return given

            return decorate
        self._add(name, item, replace)
        return item

    def register_lazy(self, name: str, target: str, *, replace: bool = False) -> None:
        """Add ``name`` as ``"package.module:attr"``, imported on its first lookup (for an
        optional extra: the table lists it, and only a user of it needs it installed)."""
        if not _TARGET.match(target):
            raise ValueError(f"{self.what} {name!r}: {target!r} is not 'package.module:attr'")
        if self.target(name) == target:  # the same entry again, imported or not
            return
        self._add(name, _Lazy(target), replace)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's throwaway entry); an unknown name is refused."""
        if name not in self._items:
            raise self._unknown(name)
        del self._items[name]
        self._targets.pop(name, None)

    @contextmanager
    def added(self, name: str, item: T, *, replace: bool = False) -> Iterator[T]:
        """``item`` registered as ``name`` for the ``with`` block only (tests); with
        ``replace``, in place of the entry there, which is put back afterwards."""
        previous, previous_target = self._items.get(name), self._targets.get(name)
        self.register(name, item, replace=replace)
        try:
            yield item
        finally:
            self._targets.pop(name, None)
            if previous is None:
                self._items.pop(name, None)
            else:  # put back in its place: the order is the start order of some seams
                self._items[name] = previous
            if previous_target is not None:
                self._targets[name] = previous_target

    # --- reading ------------------------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (no lazy entry is imported)."""
        return tuple(self._items)

    def lookup(self, name: str, *, where: str = "") -> T:
        """The item registered as ``name``; else the seam's error, prefixed with ``where``
        (e.g. ``"channel 'train': "``), listing every known name."""
        if name not in self._items:
            raise self._unknown(name, where)
        return self._resolve(name, where)

    def target(self, name: str) -> str | None:
        """A lazy entry's ``"module:attr"`` (resolved or not), None for an eager one."""
        entry = self._items.get(name)
        return entry.target if isinstance(entry, _Lazy) else self._targets.get(name)

    def __getitem__(self, name: str) -> T:
        if name not in self._items:
            raise KeyError(name)
        return self._resolve(name, "")

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._items)})"

    # --- inside -------------------------------------------------------------------------------

    def _add(self, name: str, item: T | _Lazy, replace: bool) -> None:
        if not isinstance(name, str) or not name or name != name.strip():
            raise ValueError(f"{self.what} names must be non-empty, without spaces around them")
        if name in self._items and not replace and self._items[name] is not item:
            raise ValueError(f"{self.what} {name!r} is registered already")
        if self._items.get(name) is not item:
            self._targets.pop(name, None)
        self._items[name] = item

    def _resolve(self, name: str, where: str) -> T:
        entry = self._items[name]
        if not isinstance(entry, _Lazy):
            return entry
        module_name, _, attr = entry.target.partition(":")
        try:
            item = getattr(importlib.import_module(module_name), attr)
        except ImportError as exc:
            missing = exc.name or module_name
            if missing.split(".")[0] == "trainops":  # our own module: the entry is broken
                raise self._error(
                    f"{where}{self.what} {name!r}: {entry.target} cannot be imported ({exc})"
                ) from None
            raise self._error(
                f"{where}{self.what} {name!r} needs {missing}, which is not installed here"
            ) from None
        except AttributeError:
            raise self._error(
                f"{where}{self.what} {name!r}: {entry.target} names nothing (a broken entry)"
            ) from None
        self._items[name] = cast(T, item)
        self._targets[name] = entry.target
        return cast(T, item)

    def _unknown(self, name: str, where: str = "") -> Exception:
        known = ", ".join(self._shown(n) for n in self._items) or "none"
        return self._error(f"{where}unknown {self.what} {_quoted(name)} (known: {known})")


def _quoted(name: str) -> str:
    """``name`` as Python would write it (control characters escaped), cut to a readable length
    (a name comes from a user's file or flag: it must not make a message unbounded)."""
    if len(name) <= _SHOWN_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_CHARS]!r}... ({len(name)} characters)"
