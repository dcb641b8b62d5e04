"""The architecture stays visible: imports point down the spine, heavy extras stay lazy.

Layers (DESIGN.md): interfaces (cli, server, client, sdk) > control > backends > agent > foundation
(spec, store, storage, catalog, archive, protocol and the private top-level modules). A module may
import its own package, packages of its own layer that the table allows, and anything below.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trainops

PACKAGE_ROOT = Path(trainops.__file__).parent

LAYER = {
    "cli": 5,
    "server": 5,
    "client": 5,
    "sdk": 5,
    "control": 4,
    "backends": 3,
    "agent": 2,
    "spec": 0,
    "store": 0,
    "storage": 0,
    "catalog": 0,
    "archive": 0,
    "protocol": 0,
}
# Foundation packages that must not depend on each other's internals beyond this table.
FOUNDATION_ALLOWED = {
    "spec": {"catalog", "protocol"},
    "storage": set(),
    "store": set(),
    "catalog": set(),
    "archive": set(),
    "protocol": set(),
}


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE_ROOT).parts
    return rel[0] if len(rel) > 1 else "<top>"


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "trainops" and len(parts) > 1 and parts[1] in LAYER:
                found.add(parts[1])
    return found


def test_imports_point_down_the_spine() -> None:
    violations = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        own = _package_of(path)
        if own not in LAYER:
            continue
        for target in _imported_packages(path) - {own}:
            if LAYER[own] == 0:
                ok = target in FOUNDATION_ALLOWED[own]
            else:
                ok = LAYER[target] < LAYER[own] or LAYER[target] == LAYER[own] == 5
            if not ok:
                violations.append(f"{path.relative_to(PACKAGE_ROOT)} imports trainops.{target}")
    assert violations == []


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path.relative_to(PACKAGE_ROOT))
        for path in PACKAGE_ROOT.rglob("*.py")
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert missing == []


def _modules_after_import(statement: str) -> set[str]:
    heavy = ["torch", "ray", "obstore", "fastapi", "uvicorn", "httpx", "sklearn", "pydantic"]
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_bare_import_stays_light() -> None:
    assert _modules_after_import("import trainops") == set()


def test_agent_import_stays_light() -> None:
    assert _modules_after_import("import trainops.agent") == set()


def test_run_and_submit_stay_free_of_the_spec_models() -> None:
    # `trainops run` and `submit` send the spec as plain data and the server validates it:
    # pydantic alone costs more than a warm submission, and the server tools far more.
    assert _modules_after_import("import trainops.cli._run, trainops.cli._commands") == set()
    assert _modules_after_import("import trainops.client; import trainops.spec._raw") == set()


def test_an_embedded_server_imports_fastapi_only_to_serve() -> None:
    # Its lock, store, controller and spare agent start first, overlapping FastAPI's import.
    found = _modules_after_import("from trainops.server import EmbeddedServer, HomeInUseError")
    assert found & {"fastapi", "uvicorn"} == set()
