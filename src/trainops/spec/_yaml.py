"""A strict YAML reader for job specs: no duplicate keys, and aliases within a small budget.

PyYAML's ``SafeLoader`` keeps the last of two equal keys without a word, and expands aliases
without limit: eight levels of nine aliases each (a "billion laughs" file of a few hundred
bytes) make every later walk over the document take minutes. :class:`SpecLoader` refuses both
while composing, with the line and column of the offending key or alias.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["ALIAS_BUDGET", "RefusedYAML", "SpecLoader", "load_yaml"]

# Nodes that aliases may add to the document once expanded; a real spec has a few dozen.
ALIAS_BUDGET = 10_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class RefusedYAML(yaml.MarkedYAMLError):
    """Valid YAML that a spec may not contain (a duplicate key, an alias bomb).

    ``path`` is the dotted field path of the offending key, when there is one.
    """

    def __init__(self, problem: str, mark: yaml.Mark, path: str = "") -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.path = path


class SpecLoader(yaml.SafeLoader):
    """``SafeLoader`` that counts what aliases expand to and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._sizes: dict[int, int] = {}
        self._open: set[str | None] = set()  # anchors of nodes still being composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if not self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if event.anchor in self._open:
            raise RefusedYAML(f"alias *{event.anchor} refers to itself", event.start_mark)
        node = super().compose_node(parent, index)
        if node is not None:
            self._expanded += _expanded_size(node, self._sizes)
        if self._expanded > ALIAS_BUDGET:
            raise RefusedYAML(
                f"aliases expand to more than {ALIAS_BUDGET:,} values (refused as an alias "
                "bomb); write the values out instead",
                event.start_mark,
            )
        return node

    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        self._open.add(anchor)
        try:
            return super().compose_sequence_node(anchor)
        finally:
            self._open.discard(anchor)

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        self._open.add(anchor)
        try:
            return super().compose_mapping_node(anchor)
        finally:
            self._open.discard(anchor)


def load_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """``(node, data)`` of the single document in ``text``; raises ``yaml.YAMLError``."""
    loader = SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _refuse_duplicate_keys(loader, node, "", set())
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes ``node`` stands for once every alias in it is expanded (memoised)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, sizes) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    sizes[id(node)] = size
    return size


def _refuse_duplicate_keys(loader: SpecLoader, node: yaml.Node, path: str, seen: set[int]) -> None:
    """Walk the document (each shared node once) and refuse a mapping that repeats a key."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicate_keys(loader, item, _join(path, str(index)), seen)
    elif isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key_node, value in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = loader.construct_object(key_node)
            where = _join(path, str(key))
            if key in first:
                raise RefusedYAML(
                    f"duplicate key (first on line {first[key] + 1}); a spec may set each field "
                    "once",
                    key_node.start_mark,
                    where,
                )
            first[key] = key_node.start_mark.line
            _refuse_duplicate_keys(loader, value, where, seen)


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part
