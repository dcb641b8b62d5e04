"""Settings come from the environment and config.yaml, with clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops._errors import ConfigError
from trainops._settings import MIB, Settings, TransferSettings


def test_defaults(tmp_path: Path) -> None:
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert s.home == tmp_path and s.db_path == tmp_path / "trainops.db"
    assert s.default_output_uri == f"file://{tmp_path.resolve()}/objects/jobs"
    assert s.server_url is None and s.capacity.cpus is None


def test_config_file_and_env_precedence(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "server: http://127.0.0.1:9000\ns3:\n  endpoint_url: http://127.0.0.1:8333\nlocal:\n  cpus: 3\n"
    )
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_LOCAL_CPUS": "5"})
    assert s.server_url == "http://127.0.0.1:9000"
    assert s.s3.endpoint_url == "http://127.0.0.1:8333"
    assert s.capacity.cpus == 5


def test_credentials_stay_out_of_repr(tmp_path: Path) -> None:
    s = Settings.load(
        {
            "TRAINOPS_HOME": str(tmp_path),
            "AWS_SECRET_ACCESS_KEY": "hunter2",
            "TRAINOPS_TOKEN": "tok",
        }
    )
    assert "hunter2" not in repr(s) and "tok" not in repr(s)
    assert s.s3.client_env()["AWS_SECRET_ACCESS_KEY"] == "hunter2"


@pytest.mark.parametrize(("value", "fragment"), [("two", "whole number"), ("-1", "negative")])
def test_bad_capacity(tmp_path: Path, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=f"TRAINOPS_LOCAL_CPUS.*{fragment}"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_LOCAL_CPUS": value})


def test_bad_config_yaml(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("s3: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path)})


def test_transfer_settings_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).transfer == TransferSettings()
    (tmp_path / "config.yaml").write_text("transfer:\n  part_size_mb: 8\n  memory_mb: 64\n")
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_TRANSFER_CONCURRENCY": "4"})
    assert s.transfer == TransferSettings(concurrency=4, part_size=8 * MIB, memory=64 * MIB)
    assert s.transfer.part_slots == 8
    (tmp_path / "config.yaml").write_text("transfer:\n  sync_part_concurrency: 3\n")
    s = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert s.transfer == TransferSettings(sync_part_concurrency=3)
    # A child process (the background uploader) gets the same settings through its environment.
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path), **s.transfer.env()}) == s


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"TRAINOPS_TRANSFER_CONCURRENCY": "0"}, "concurrency must be at least 1"),
        ({"TRAINOPS_TRANSFER_PART_SIZE_MB": "4"}, "part size must be at least 5 MiB"),
        ({"TRAINOPS_TRANSFER_MEMORY_MB": "8"}, "must hold at least one part"),
        ({"TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY": "0"}, "sync part concurrency must be at"),
        ({"TRAINOPS_TRANSFER_MEMORY_MB": "lots"}, "TRAINOPS_TRANSFER_MEMORY_MB.*whole number"),
    ],
)
def test_bad_transfer_settings(tmp_path: Path, env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Settings.load({"TRAINOPS_HOME": str(tmp_path), **env})


def test_heartbeat_timeout_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).heartbeat_timeout == 60
    (tmp_path / "config.yaml").write_text("heartbeat_timeout: 15\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).heartbeat_timeout == 15
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_HEARTBEAT_TIMEOUT": "5"}
    assert Settings.load(env).heartbeat_timeout == 5
    for bad, fragment in (("4", "at least 5 seconds"), ("soon", "expected a whole number")):
        with pytest.raises(ConfigError, match=fragment):
            Settings.load({**env, "TRAINOPS_HEARTBEAT_TIMEOUT": bad})


def test_backend_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).backend == "local"
    (tmp_path / "config.yaml").write_text("backend: ray\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).backend == "ray"
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_BACKEND": "local"}
    assert Settings.load(env).backend == "local"


def test_shared_paths_from_env_and_config(tmp_path: Path) -> None:
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).shared_paths == ()
    (tmp_path / "config.yaml").write_text("shared_paths: [/mnt/nfs, /data/]\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).shared_paths == ("/mnt/nfs", "/data")
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_SHARED_PATHS": "/a, /b"}
    assert Settings.load(env).shared_paths == ("/a", "/b")
    with pytest.raises(ConfigError, match="absolute folders, not 'rel'"):
        Settings.load({**env, "TRAINOPS_SHARED_PATHS": "rel"})


def test_webhook_networks_come_from_config_or_env_and_bad_ones_are_named(tmp_path: Path) -> None:
    home = {"TRAINOPS_HOME": str(tmp_path)}
    assert Settings.load(home).webhook_networks == ()  # none: public addresses only
    (tmp_path / "config.yaml").write_text("webhook_networks: [loopback, 10.1.0.0/16]\n")
    assert Settings.load(home).webhook_networks == ("loopback", "10.1.0.0/16")
    env = {**home, "TRAINOPS_WEBHOOK_NETWORKS": "private, fd00::/8"}
    assert Settings.load(env).webhook_networks == ("private", "fd00::/8")
    (tmp_path / "config.yaml").write_text("webhook_networks: [intranet]\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: webhook_networks entry 'intranet'"):
        Settings.load(home)
    with pytest.raises(ConfigError, match=r"TRAINOPS_WEBHOOK_NETWORKS: .*'10\.0\.0\.0/33'"):
        Settings.load({**home, "TRAINOPS_WEBHOOK_NETWORKS": "10.0.0.0/33"})
