"""The public surface is exactly ``trainops.__all__``, and every name in it resolves."""

from __future__ import annotations

import subprocess
import sys
import types

import trainops

EXPECTED = {
    "ArchiveError",
    "Channel",
    "CheckpointConfig",
    "Client",
    "ConfigError",
    "HyperparameterTuner",
    "JobNotFoundError",
    "JobSpec",
    "MetricDefinition",
    "RetryStrategy",
    "ServerError",
    "SpecError",
    "StoppingCondition",
    "StorageError",
    "TrainingJob",
    "TrainopsError",
    "UnexpectedStatusError",
    "__version__",
    "connect",
    "load_spec",
}


def test_exported_members() -> None:
    assert set(trainops.__all__) == EXPECTED


def test_every_export_resolves() -> None:
    for name in trainops.__all__:
        assert getattr(trainops, name) is not None, name


def test_public_names_of_the_module_are_exported() -> None:
    # Submodules appear as attributes once imported (by any test); they are reached by their
    # dotted path, so only the non-module names count.
    public = {
        name
        for name, value in vars(trainops).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    public -= {"annotations"}
    assert public <= set(trainops.__all__)


def test_lazy_packages_resolve_every_exported_name() -> None:
    # trainops.spec and trainops.server import their names on first use (the CLI's run path
    # must not pay for the spec models or the server), and trainops.agent (the control plane only
    # needs its launchers), and trainops.control, .backends and .actions (every process reads
    # their settings, few need the rest); every name they export must still resolve.
    import trainops.actions
    import trainops.agent
    import trainops.backends
    import trainops.control
    import trainops.server
    import trainops.spec
    import trainops.storage

    lazy = (trainops.spec, trainops.server, trainops.storage, trainops.agent, trainops.control)
    for package in (*lazy, trainops.backends, trainops.actions):
        missing = [name for name in package.__all__ if getattr(package, name, None) is None]
        assert missing == [], package.__name__


def test_the_control_plane_does_not_import_the_agent() -> None:
    # The server needs the launcher table (to refuse what no agent can launch), not the agent.
    code = (
        "import sys, trainops.server._run, trainops.control; "
        "print(sorted(m for m in sys.modules if m.startswith('trainops.agent.')"
        " and not m.startswith('trainops.agent.launchers')"
        " and m != 'trainops.agent._settings'))"  # its settings, a leaf every process reads
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
