"""The architecture stays visible: imports point down the spine, heavy extras stay lazy.

Layers (DESIGN.md, top to bottom): interfaces (cli, server, client, sdk) > control and the
services beside it (tuning, notifications) > placement (backends) > host (agent) > in-job
libraries (data, distributed, profiler, debugger: imported by training scripts, no server) >
analysis (cost, rules that read artifacts) > foundation (spec, store, storage, catalog, archive,
protocol and the private top-level modules). A module may import its own package, anything in a
lower layer, and a package of its own layer only where the table below allows it. Every package
must be placed: a new one that is not fails the test until its layer is decided here. Inside the
agent the same holds for its parts (contract > supervision > reporting, and the three seams).
A component's own settings (``<package>/_settings.py``) are the one exception to the layers:
leaves that import only the foundation, which the top-level ``_settings`` composes
(docs/internals/settings.md).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import trainops
from trainops._registry import Registry

PACKAGE_ROOT = Path(trainops.__file__).parent

INTERFACES, CONTROL, PLACEMENT, HOST, IN_JOB, ANALYSIS, FOUNDATION = 6, 5, 4, 3, 2, 1, 0
LAYER = {
    "cli": INTERFACES,
    "server": INTERFACES,
    "client": INTERFACES,
    "sdk": INTERFACES,
    "control": CONTROL,
    "tuning": CONTROL,
    "tuner": CONTROL,  # the service that runs tuning jobs (trials are training jobs)
    "notifications": CONTROL,
    "rules": CONTROL,  # evaluated live beside the controller, on the profiler's data
    "actions": CONTROL,  # what a rule's finding does (stop, webhook, command)
    "report": CONTROL,  # the profiler report, computed from the data and the rules' results
    "backends": PLACEMENT,
    "agent": HOST,
    "data": IN_JOB,
    "distributed": IN_JOB,
    "profiler": IN_JOB,
    "monitor": IN_JOB,  # the system monitor the agent's sidecar runs; writes profiler data
    "tensorboard": IN_JOB,  # event files, written by the agent's sidecar or a script
    "debugger": IN_JOB,
    "cost": ANALYSIS,
    "spec": FOUNDATION,
    "store": FOUNDATION,
    "storage": FOUNDATION,
    "catalog": FOUNDATION,
    "archive": FOUNDATION,
    "protocol": FOUNDATION,
}
# Imports allowed between packages of one layer (anything not listed is refused).
SAME_LAYER_ALLOWED = {
    "cli": {"client", "sdk", "server"},  # `trainops server` serves
    "server": set(),
    "client": {"server"},  # the embedded server, started lazily by `connect`
    "sdk": {"client"},
    "control": set(),
    "tuning": {"control"},
    "tuner": {"control", "tuning"},
    "notifications": {"control"},
    "rules": {"control", "actions"},  # a service of the control plane that runs actions
    "actions": set(),
    "report": {"rules", "control"},  # the report at job end is a control-plane service
    "monitor": {"profiler"},
    # the job's bootstrap (profiler/_bootstrap) also installs the debugger hook once torch loads
    "profiler": {"debugger"},
    "tensorboard": {"data", "profiler"},
    "debugger": {"data", "tensorboard"},  # TFRecord framing; histograms of the saved tensors
    "spec": {"catalog", "protocol", "storage"},  # locations are checked against STORES' schemes
    "store": {"protocol"},  # job records carry the typed view of their spec
}
# Inside the agent: what each part may import of the agent's other parts (its own part always).
# The SageMaker contract asks the host's namespaces whether /opt/ml is shown; supervision writes
# what it captures to the reporting side and starts what the launchers ask for (a channel's Bind
# is a type it mounts); reporting is the bottom. _agent.py and _ranks.py, at the top, join them.
AGENT_PART_ALLOWED = {
    "contract": {"supervision"},
    "supervision": {"reporting", "launchers", "channels"},
    "reporting": set(),
    "launchers": set(),
    "channels": {"supervision"},
    "sidecars": {"contract", "supervision", "reporting"},
}
# Packages that training scripts import: they must load without a server and without pulling in
# heavy extras (torch is imported lazily, inside the functions that need it).
IN_JOB_PACKAGES = sorted(name for name, layer in LAYER.items() if layer == IN_JOB)


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE_ROOT).parts
    return rel[0] if len(rel) > 1 else "<top>"


def _packages() -> set[str]:
    return {p.parent.name for p in PACKAGE_ROOT.glob("*/__init__.py")}


def _imported_modules(path: Path) -> set[str]:
    """The trainops modules ``path`` imports (anywhere in it, type-checking blocks included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.startswith("trainops.")}


def _package_of_module(module: str) -> str | None:
    """The package of ``trainops.<package>…``; None for a private top-level module."""
    part = module.split(".")[1]
    return None if part.startswith("_") else part


def _imported_packages(path: Path) -> set[str]:
    return {p for p in map(_package_of_module, _imported_modules(path)) if p is not None}


def _is_settings_section(module: str) -> bool:
    """A component's own settings (``trainops.<package>[.<sub>]._settings``): the top-level
    ``_settings`` composes them, so they sit in the foundation whatever their package's layer."""
    parts = module.split(".")
    return len(parts) > 2 and parts[-1] == "_settings"


def _allowed(own: str, target: str) -> bool:
    if target not in LAYER:
        return False
    if LAYER[target] == LAYER[own]:
        return target in SAME_LAYER_ALLOWED.get(own, set())
    return LAYER[target] < LAYER[own]


def test_every_package_is_placed_in_a_layer() -> None:
    assert sorted(_packages() - set(LAYER)) == []


def test_imports_point_down_the_spine() -> None:
    violations = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        own = _package_of(path)
        if own == "<top>":
            continue
        for target in _imported_packages(path) - {own}:
            if not _allowed(own, target):
                violations.append(f"{path.relative_to(PACKAGE_ROOT)} imports trainops.{target}")
    assert violations == []


def _agent_part_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE_ROOT / "agent").parts
    return rel[0] if len(rel) > 1 else "<top>"


def _imported_agent_parts(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "trainops.agent":
                names = [f"trainops.agent.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["trainops", "agent"]:
                found.add(parts[2] if len(parts) > 2 else "<top>")
    return found


def test_every_part_of_the_agent_is_placed() -> None:
    parts = {p.parent.name for p in (PACKAGE_ROOT / "agent").glob("*/__init__.py")}
    assert sorted(parts - set(AGENT_PART_ALLOWED)) == []


def test_the_agent_parts_import_down() -> None:
    violations = []
    for path in sorted((PACKAGE_ROOT / "agent").rglob("*.py")):
        own = _agent_part_of(path)
        if own == "<top>":
            continue
        for target in _imported_agent_parts(path) - {own}:
            if target not in AGENT_PART_ALLOWED.get(own, set()):
                violations.append(
                    f"{path.relative_to(PACKAGE_ROOT)} imports trainops.agent.{target}"
                )
    assert violations == []


def test_private_top_level_modules_import_only_the_foundation() -> None:
    violations = []
    for path in sorted(PACKAGE_ROOT.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for module in _imported_modules(path):
            target = _package_of_module(module)
            if target is None or _is_settings_section(module):
                continue
            if LAYER.get(target, INTERFACES) != FOUNDATION:
                violations.append(f"{path.name} imports trainops.{target}")
    assert violations == []


def test_component_settings_import_only_the_foundation_and_their_own_package() -> None:
    # `_settings.py` may compose every component's settings only because these are leaves.
    violations = []
    for path in sorted(PACKAGE_ROOT.glob("*/**/_settings.py")):
        own = _package_of(path)
        for target in _imported_packages(path) - {own}:
            if LAYER.get(target, INTERFACES) != FOUNDATION:
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
    heavy = ["torch", "ray", "obstore", "fastapi", "starlette", "uvicorn", "httpx", "sklearn"]
    heavy += ["pydantic", "trainops.server._openapi"]
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_bare_import_stays_light() -> None:
    assert _modules_after_import("import trainops") == set()


def test_loading_settings_imports_only_the_settings_of_each_component() -> None:
    # Every command loads them: a component's settings must not drag in the component.
    load = (
        "from trainops._settings import Settings; Settings.load({'TRAINOPS_HOME': '/nonexistent'})"
    )
    assert _modules_after_import(load) == set()
    code = (
        f"import sys\n{load}\nprint(' '.join(m for m in sys.modules if m.startswith('trainops.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    sections = {
        m for m in _imported_modules(PACKAGE_ROOT / "_settings.py") if _is_settings_section(m)
    }
    beside = {
        m
        for s in sections
        for m in _imported_modules(PACKAGE_ROOT.joinpath(*s.split(".")[1:]).with_suffix(".py"))
    }
    extra = [
        m
        for m in out.stdout.split()
        if LAYER.get(_package_of_module(m) or "", FOUNDATION) != FOUNDATION
        and m.count(".") > 1
        and m not in sections | beside
    ]
    assert extra == []


def test_agent_import_stays_light() -> None:
    assert _modules_after_import("import trainops.agent") == set()


def test_run_and_submit_stay_free_of_the_spec_models() -> None:
    # `trainops run` and `submit` send the spec as plain data and the server validates it:
    # pydantic alone costs more than a warm submission, and the server tools far more.
    assert _modules_after_import("import trainops.cli._run, trainops.cli._commands") == set()
    assert _modules_after_import("import trainops.client; import trainops.spec._raw") == set()


def test_an_embedded_server_imports_starlette_only_to_serve() -> None:
    # Its lock, store, controller and spare agent start first, overlapping Starlette's import.
    found = _modules_after_import("from trainops.server import EmbeddedServer, HomeInUseError")
    assert found & {"starlette", "uvicorn"} == set()


def test_the_server_app_never_imports_fastapi_nor_writes_its_document_up_front() -> None:
    # FastAPI alone cost ~150 ms of every embedded `trainops run`; the OpenAPI document is only
    # written (and its module imported) on the first GET /openapi.json.
    found = _modules_after_import("import trainops.server._app, trainops.server._run")
    assert "starlette" in found
    assert found & {"fastapi", "trainops.server._openapi"} == set()


def test_in_job_libraries_import_light() -> None:
    present = [name for name in IN_JOB_PACKAGES if (PACKAGE_ROOT / name / "__init__.py").exists()]
    heavy = {name: _modules_after_import(f"import trainops.{name}") for name in present}
    assert {name: found for name, found in heavy.items() if found} == {}


# Every table of implementations, as (module, attribute): each is a trainops._registry.Registry.
REGISTRIES = [
    ("trainops.cli", "HANDLERS"),
    ("trainops.backends._registry", "BACKENDS"),
    ("trainops.storage._registry", "STORES"),
    ("trainops.agent.launchers", "LAUNCHERS"),
    ("trainops.agent.supervision._rank_report", "TAG_STYLES"),
    ("trainops.agent.channels", "KINDS"),
    ("trainops.agent.sidecars", "SIDECARS"),
    ("trainops.control.services", "SERVICES"),
    ("trainops.rules._registry", "RULES"),
    ("trainops.actions._run", "ACTIONS"),
    ("trainops.data.packer._formats", "FORMATS"),
    ("trainops.data.pipe._dataset", "RECORD_FORMATS"),
    ("trainops.data.streaming._dataset", "SHARD_SOURCES"),
    ("trainops.profiler._windows", "WINDOWS"),
    ("trainops.server.ui", "PAGES"),
]


def _registry(module: str, attr: str) -> Registry[object]:
    table = getattr(importlib.import_module(module), attr)
    assert isinstance(table, Registry), f"{module}.{attr} is not a Registry"
    return table


def test_every_table_of_implementations_is_a_registry() -> None:
    for module, attr in REGISTRIES:
        _registry(module, attr)


def test_every_lazy_entry_resolves_and_points_down_the_spine() -> None:
    violations = []
    for module, attr in REGISTRIES:
        table = _registry(module, attr)
        own = module.split(".")[1]
        for name in table.names():
            table.lookup(name)  # a moved or renamed module fails here, not in a user's job
            target = table.target(name)
            parts = (target or "").split(":")[0].split(".")
            upward = target and parts[1] != own and not parts[1].startswith("_")
            if upward and not _allowed(own, parts[1]):
                violations.append(f"{module}.{attr}[{name!r}] -> {target}")
    assert violations == []
