"""Every registered sidecar satisfies the contract of ``trainops.agent.sidecars._base``.

Each kind in ``SIDECARS`` has a :class:`SidecarCase`: how to make a job that asks for it, and
what it must leave behind once finished. The suite runs every case the same way: the factory
declines a job that does not ask; prepare, environment, start and finish in order leave what
the case expects and no thread or process behind, also after hearing of a script process's
death by a signal; finish without start is harmless; abort stops it without raising. A kind
registered without a case fails the suite.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agent._support import make_job
from trainops._settings import Settings
from trainops.agent.contract._outputs import OutputLayout
from trainops.agent.contract._tree import HostTree
from trainops.agent.sidecars import SIDECARS, Sidecar, SidecarContext
from trainops.profiler import profiler_prefix
from trainops.storage import store_for


@dataclass
class Host:
    """One host's context for a sidecar, built the way the agent builds it."""

    context: SidecarContext
    tree: HostTree
    objects: Path
    lines: list[str] = field(default_factory=list)
    listeners: list[Callable[[str, float, list[float]], None]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def make_host(tmp_path: Path, **spec: Any) -> Host:
    job = make_job(tmp_path, {"train.py": "pass\n"}, **spec)
    tree = HostTree(job.root, job.assignment.spec.checkpoint_local_path)
    for folder in (tree.config_dir, tree.model_dir, tree.intermediate_dir, tree.checkpoint_dir):
        folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(home=tmp_path / "home")
    lines: list[str] = []
    listeners: list[Callable[[str, float, list[float]], None]] = []
    state = job.state_dir / "sidecars"
    state.mkdir(parents=True, exist_ok=True)
    context = SidecarContext(
        assignment=job.assignment,
        tree=tree,
        layout=OutputLayout(
            job.assignment.output_prefix,
            job.assignment.current_host,
            len(job.assignment.hosts),
            job.assignment.attempt,
        ),
        state_dir=state,
        settings=settings,
        store_for=lambda uri: store_for(uri, settings),
        log=lines.append,
        add_metric_listener=listeners.append,
        sync_interval=0.1,
    )
    return Host(context, tree, job.objects, lines, listeners)


@dataclass(frozen=True)
class SidecarCase:
    """``spec``: job fields that make the job ask for the sidecar; ``work(host)`` plays the
    script while the sidecar runs; ``check(host)`` asserts what finish left behind; ``env``:
    variables the environment holds before this sidecar's turn (set by sidecars before it)."""

    spec: Callable[[Path], dict[str, Any]]
    work: Callable[[Host], None]
    check: Callable[[Host], None]
    env: Callable[[Host], dict[str, str]] = lambda host: {}


def _checkpoint_spec(tmp_path: Path) -> dict[str, Any]:
    return {"checkpoint": {"uri": (tmp_path / "ckpt-remote").as_uri()}}


def _write_checkpoint(host: Host) -> None:
    (host.tree.checkpoint_dir / "step-1.pt").write_bytes(b"weights" * 100)


def _checkpoint_uploaded(host: Host) -> None:
    remote = Path(str(host.context.job.checkpoint_uri).removeprefix("file://"))
    assert (remote / "step-1.pt").read_bytes() == b"weights" * 100


def _write_intermediate(host: Host) -> None:
    (host.tree.intermediate_dir / "curve.csv").write_text("1,0.5\n")


def _intermediate_uploaded(host: Host) -> None:
    prefix = host.context.layout.intermediate_prefix
    found = [info.key for info in host.context.store_for(prefix).list_objects(prefix + "/")]
    assert any(key.endswith("curve.csv") for key in found), found


def _keys_under(host: Host, prefix: str) -> list[str]:
    return [info.key for info in host.context.store_for(prefix).list_objects(prefix + "/")]


def _profiler_spec(tmp_path: Path) -> dict[str, Any]:
    return {"profiler_config": {"system_monitor_interval_millis": 100}}


def _let_it_sample(host: Host) -> None:
    time.sleep(0.4)


def _profiler_uploaded(host: Host) -> None:
    prefix = profiler_prefix(None, host.context.layout.output_prefix)
    keys = _keys_under(host, prefix)
    assert "meta/algo-1.json" in keys, keys
    assert any(k.startswith("system/algo-1/") and k.endswith(".tsc") for k in keys), keys
    assert host.env["TRAINOPS_PROFILER_DIR"] and host.env["TRAINOPS_PROFILER_CONFIG"]


def _profiler_dir(host: Host) -> dict[str, str]:
    folder = host.tree.root / "output" / "profiler"
    folder.mkdir(parents=True, exist_ok=True)
    return {"TRAINOPS_PROFILER_DIR": str(folder)}


def _bootstrap_on_path(host: Host) -> None:
    first = host.env["PYTHONPATH"].split(os.pathsep)[0]
    assert (Path(first) / "sitecustomize.py").is_file(), first


def _tensorboard_spec(tmp_path: Path) -> dict[str, Any]:
    return {
        "tensorboard_output_config": {},
        "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
    }


def _scrape_metrics(host: Host) -> None:
    assert host.listeners, "a TensorBoard sidecar hears the scraped metrics"
    for value in (0.9, 0.5, 0.3):
        for listener in host.listeners:
            listener("loss", time.time(), [value])


def _events_uploaded(host: Host) -> None:
    keys = _keys_under(host, host.context.layout.output_prefix.rstrip("/") + "/tensorboard")
    assert any("events.out.tfevents." in k for k in keys), keys


def _debugger_spec(tmp_path: Path) -> dict[str, Any]:
    return {"debugger_hook_config": {"hook_parameters": {"save_interval": 1}}}


def _write_step(host: Host) -> None:
    tensors = host.tree.root / "output" / "tensors"
    (tensors / "events" / "000000000000").mkdir(parents=True)
    (tensors / "index" / "000000000").mkdir(parents=True)
    (tensors / "events/000000000000/000000000000_worker_0.tfevents").write_bytes(b"records")
    (tensors / "index/000000000/000000000000_worker_0.json").write_text("{}")


def _step_uploaded(host: Host) -> None:
    prefix = host.context.layout.output_prefix.rstrip("/") + "/debug-output"
    keys = _keys_under(host, prefix)
    assert "index/000000000/000000000000_worker_0.json" in keys, keys
    assert "training_job_end.ts" in keys, keys
    assert host.env["SMDEBUG_CONFIG_FILE_PATH"].endswith("input/config/debughookconfig.json")


CASES: dict[str, SidecarCase] = {
    "debugger": SidecarCase(_debugger_spec, _write_step, _step_uploaded),
    "checkpoints": SidecarCase(_checkpoint_spec, _write_checkpoint, _checkpoint_uploaded),
    "intermediate": SidecarCase(lambda tmp: {}, _write_intermediate, _intermediate_uploaded),
    "profiler": SidecarCase(_profiler_spec, _let_it_sample, _profiler_uploaded),
    "framework": SidecarCase(
        lambda tmp: {"profiler_config": {}}, lambda host: None, _bootstrap_on_path, _profiler_dir
    ),
    "tensorboard": SidecarCase(_tensorboard_spec, _scrape_metrics, _events_uploaded),
}
# Kinds every job gets (their factory never declines).
ALWAYS_ON = {"intermediate"}


def _case(name: str) -> SidecarCase:
    if name not in CASES:
        pytest.fail(f"no SidecarCase for the {name!r} sidecar: add one to {__file__}")
    return CASES[name]


def _made(name: str, host: Host) -> Sidecar | None:
    return SIDECARS[name](host.context)


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _settled(before_threads: set[int], before_children: set[int]) -> None:
    """No thread or process the sidecar started is still running (a little time to end)."""
    deadline = time.monotonic() + 10
    while True:
        threads = {t.ident for t in threading.enumerate() if t.is_alive()} - before_threads
        children = _children() - before_children
        if not threads and not children:
            return
        if time.monotonic() > deadline:
            names = [t.name for t in threading.enumerate() if t.ident in threads]
            raise AssertionError(f"left running: threads {names}, processes {children}")
        time.sleep(0.05)


def _baseline() -> tuple[set[int], set[int]]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}, _children()


def test_every_registered_sidecar_has_a_case() -> None:
    assert set(SIDECARS) == set(CASES), "add a SidecarCase for each registered sidecar"


@pytest.mark.parametrize("name", SIDECARS.names())
def test_declines_a_job_that_does_not_ask(name: str, tmp_path: Path) -> None:
    if name in ALWAYS_ON:
        pytest.skip(f"{name} runs for every job")
    assert _made(name, make_host(tmp_path)) is None


@pytest.mark.parametrize("name", SIDECARS.names())
def test_full_cycle_leaves_its_artifacts_and_nothing_running(name: str, tmp_path: Path) -> None:
    case = _case(name)
    host = make_host(tmp_path, **case.spec(tmp_path))
    threads, children = _baseline()
    sidecar = _made(name, host)
    assert sidecar is not None and sidecar.name
    sidecar.prepare()
    before = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": "/keep", **case.env(host)}
    env = dict(sidecar.environment(before))
    host.env = {**before, **env}
    for key, value in env.items():
        assert key and "=" not in key and "\0" not in key + value, key
    if "PYTHONPATH" in env:
        assert "/keep" in env["PYTHONPATH"].split(os.pathsep), "PYTHONPATH must be extended"
    sidecar.start()
    case.work(host)
    artifacts = sidecar.finish()
    for artifact in artifacts:
        assert artifact.name and "://" in artifact.uri, artifact
    case.check(host)
    _settled(threads, children)


@pytest.mark.parametrize("name", SIDECARS.names())
def test_a_death_by_signal_long_before_changes_nothing_it_leaves(name: str, tmp_path: Path) -> None:
    """``script_killed`` is heard quietly while running (a rank died of a signal ten seconds
    ago; what the script writes since is whole): the cycle still leaves what the case wants."""
    case, host, sidecar, before = _running(name, tmp_path)
    sidecar.script_killed(signal.SIGKILL, time.time() - 10.0)
    case.work(host)
    sidecar.finish()
    case.check(host)
    _settled(*before)


@pytest.mark.parametrize("name", SIDECARS.names())
def test_finish_without_start_is_harmless(name: str, tmp_path: Path) -> None:
    host = make_host(tmp_path, **_case(name).spec(tmp_path))
    threads, children = _baseline()
    sidecar = _made(name, host)
    assert sidecar is not None
    sidecar.prepare()
    sidecar.finish()
    _settled(threads, children)


@pytest.mark.parametrize("name", SIDECARS.names())
def test_abort_stops_it(name: str, tmp_path: Path) -> None:
    case, host, sidecar, before = _running(name, tmp_path)
    case.work(host)
    sidecar.abort()
    _settled(*before)


def _running(
    name: str, tmp_path: Path
) -> tuple[SidecarCase, Host, Sidecar, tuple[set[int], set[int]]]:
    """``name``'s case made, prepared and started; and what ran before it (for ``_settled``)."""
    case = _case(name)
    host = make_host(tmp_path, **case.spec(tmp_path))
    before = _baseline()
    sidecar = _made(name, host)
    assert sidecar is not None
    sidecar.prepare()
    host.env = {"PYTHONPATH": "/keep", **case.env(host)}
    host.env.update(sidecar.environment(host.env))
    sidecar.start()
    return case, host, sidecar, before


def test_the_checkpoint_sidecar_starts_its_uploader_before_the_script(tmp_path: Path) -> None:
    """A job that asks for checkpoint sync writes checkpoints: its uploader starts with the
    sidecar, so its start-up never lands in the middle of training; intermediate output, which
    most jobs never write, starts one only at its first file."""
    host = make_host(tmp_path, **_checkpoint_spec(tmp_path))
    checkpoints = SIDECARS["checkpoints"](host.context)
    intermediate = SIDECARS["intermediate"](host.context)
    assert checkpoints is not None and intermediate is not None
    before = set(psutil.Process().children(recursive=True))
    checkpoints.start()
    intermediate.start()
    try:
        started = set(psutil.Process().children(recursive=True)) - before
        assert len(started) == 1  # the checkpoint uploader; no file exists yet
    finally:
        checkpoints.abort()
        intermediate.abort()
