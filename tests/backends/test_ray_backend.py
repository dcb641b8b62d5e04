"""The Ray backend's own rules that need no cluster: its settings, how a host's bundle is made,
and the clear errors of a cluster that is not configured or not there.

What it does on a real cluster is in the conformance suite (test_backend_conformance.py, the
"ray" recipe) and the end-to-end scenarios (tests/e2e, test_ray_faults.py).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from trainops._errors import ConfigError
from trainops._settings import RaySettings, Settings
from trainops.backends import backend_for
from trainops.backends._ray import RayBackend, bundle_for
from trainops.backends._ray_nodes import DEFAULT_NOTICE_S, NodeWatch
from trainops.catalog import get_instance_type


def test_ray_settings_come_from_config_and_environment(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "backend: ray\nray:\n  address: 10.0.0.5:6379\n  placement: spread\n  autoscaling: yes\n"
    )
    settings = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert settings.backend == "ray"
    assert settings.ray == RaySettings("10.0.0.5:6379", "trainops", "spread", True)
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_RAY_ADDRESS": "auto"}
    assert Settings.load({**env, "TRAINOPS_RAY_AUTOSCALING": "0"}).ray.autoscaling is False
    assert Settings.load(env).ray.address == "auto"
    with pytest.raises(ConfigError, match=r"ray\.placement must be one of strict_spread, spread"):
        Settings.load({**env, "TRAINOPS_RAY_PLACEMENT": "pack"})
    with pytest.raises(
        ConfigError, match=r"variable TRAINOPS_RAY_AUTOSCALING: must be true or false, not .maybe."
    ):
        Settings.load({**env, "TRAINOPS_RAY_AUTOSCALING": "maybe"})


def test_a_hosts_bundle_is_its_instance_type(tmp_path: Path) -> None:
    large = get_instance_type("ml.m5.large")
    assert bundle_for(large, set()) == {"CPU": 2.0, "memory": 8.0 * 2**30}
    gpu = get_instance_type("ml.p3.2xlarge")
    declared = bundle_for(gpu, {"ml.p3.2xlarge", "CPU"})
    assert declared["GPU"] == 1.0 and declared["ml.p3.2xlarge"] == 1.0 and declared["CPU"] == 8.0


def test_a_cluster_without_an_address_is_a_clear_error(tmp_path: Path) -> None:
    backend = backend_for(Settings(home=tmp_path, backend="ray"))
    assert isinstance(backend, RayBackend)
    with pytest.raises(ConfigError, match="needs the cluster's address"):
        backend.open()


def test_a_cluster_that_is_not_there_is_a_clear_error_at_once(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings(home=tmp_path, backend="ray", ray=RaySettings(f"127.0.0.1:{port}"))
    # Refused by a probe of the head's port, not after ray.init's minutes of retries.
    with pytest.raises(ConfigError, match=r"Connection refused; is its head running"):
        RayBackend(settings).open()


def test_a_drain_without_a_deadline_gets_two_minutes_of_notice_and_each_node_is_told_once() -> None:
    watch = NodeWatch(clock=lambda: 1000.0)
    draining = {"ab" * 28: 0, "cd" * 28: 1_030_000}
    nodes = [
        {"NodeID": "ab" * 28, "Alive": True, "NodeManagerAddress": "10.0.0.1"},
        {"NodeID": "cd" * 28, "Alive": True, "NodeManagerAddress": "10.0.0.2"},
        {"NodeID": "ef" * 28, "Alive": False, "NodeManagerAddress": "10.0.0.3",
         "DeathReason": 2, "DeathReasonMessage": "health check\x1b[2J\nfailed" + "!" * 500},
    ]  # fmt: skip
    reports = {p.node: p for p in watch.poll(draining, nodes)}
    assert reports["10.0.0.1/" + "ab" * 6].deadline == 1000.0 + DEFAULT_NOTICE_S
    assert "no deadline given" in reports["10.0.0.1/" + "ab" * 6].reason
    assert reports["10.0.0.2/" + "cd" * 6].deadline == 1030.0
    assert "goes in 30 s" in reports["10.0.0.2/" + "cd" * 6].reason
    gone = reports["10.0.0.3/" + "ef" * 6]
    assert gone.deadline is None and "was lost: health check [2J failed!!!" in gone.reason
    assert gone.reason.isprintable() and len(gone.reason) < 300
    # Once each, also when a drained node then dies.
    nodes[0]["Alive"] = False
    assert watch.poll(draining, nodes) == []
    watch.lost(nodes[1], "its raylet does not answer")
    assert not watch.holding("cd" * 28) and watch.poll({}, nodes) == []
