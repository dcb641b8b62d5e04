"""trainops.data's parts import down only: record formats and shards at the bottom, the packer
and Pipe channels on them, the streaming dataset on top (docs/internals/data-library.md).

A part may import its own modules, the package's shared ``_errors`` and ``_torch``, and the
parts of a lower level; never a part of its own level or above, nor ``trainops.data`` itself
(whose lazy names would hide which part a module leans on). A new part fails the test until its
level is decided here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trainops.data

DATA_ROOT = Path(trainops.data.__file__).parent

LEVEL = {"formats": 0, "shards": 0, "packer": 1, "pipe": 1, "streaming": 2}
SHARED = {"_errors", "_torch"}  # modules at the top of the package, used by every part


def _parts() -> set[str]:
    return {p.parent.name for p in DATA_ROOT.glob("*/__init__.py")}


def _data_imports(path: Path) -> set[str]:
    """What ``path`` imports from trainops.data: a part's name, a shared module's, or ``""``
    for the package itself (every import, those inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module if node.level == 0 else "trainops.data.<relative>"]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["trainops", "data"]:
                found.add(parts[2] if len(parts) > 2 else "")
    return found


def _refused(own: str | None, target: str) -> bool:
    """Whether a module of part ``own`` (None: a shared module) may not import ``target``."""
    if target == own or target in SHARED:
        return False
    return own is None or target not in LEVEL or LEVEL[target] >= LEVEL[own]


def _violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel == Path("__init__.py"):
            continue  # the public face: it names every part's exports
        own = rel.parts[0] if len(rel.parts) > 1 else None
        found += [
            f"{rel} imports trainops.data.{target}".rstrip(".")
            for target in sorted(_data_imports(path))
            if _refused(own, target)
        ]
    return found


def test_every_part_has_a_level() -> None:
    assert sorted(_parts() - set(LEVEL)) == []
    assert sorted(set(LEVEL) - _parts()) == []


def test_no_part_is_named_as_an_exported_name() -> None:
    # Importing a part binds its name on trainops.data: a part called ``pack`` would replace the
    # exported function pack() for every script that had imported the packer first.
    assert sorted(_parts() & set(trainops.data.__all__)) == []


def test_the_parts_import_down_only() -> None:
    assert _violations(DATA_ROOT) == []


def test_an_import_up_or_across_is_caught(tmp_path: Path) -> None:
    # The rule above must be able to fail: one module of each kind of wrong import.
    wrong = {
        "formats/_x.py": "from trainops.data.shards._format import ShardReader\n",
        "shards/_x.py": "def f():\n    import trainops.data.streaming._dataset\n",
        "pipe/_x.py": "from trainops.data.packer._pack import pack\n",
        "streaming/_x.py": "from trainops.data import pack\n",
        "packer/_x.py": "from ._source import SourceFile\n",
        "_shared.py": "from trainops.data.formats._lines import LineReader\n",
    }
    right = {
        "streaming/_y.py": "from trainops.data.pipe._channel import PipeChannel\n",
        "packer/_y.py": "from trainops.data._errors import PackError\nimport trainops.storage\n",
        "__init__.py": "from trainops.data.streaming._dataset import StreamingDataset\n",
    }
    for name, text in {**wrong, **right}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text('"""x."""\n' + text, encoding="utf-8")
    assert _violations(tmp_path) == [
        "_shared.py imports trainops.data.formats",
        "formats/_x.py imports trainops.data.shards",
        "packer/_x.py imports trainops.data.<relative>",
        "pipe/_x.py imports trainops.data.packer",
        "shards/_x.py imports trainops.data.streaming",
        "streaming/_x.py imports trainops.data",
    ]
