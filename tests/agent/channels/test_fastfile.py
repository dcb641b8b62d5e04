"""FastFile channels, read by a real process in a namespace like the script's: on file:// (a
read-only bind, a host's share as links) and on s3:// (a real rclone FUSE mount of a real
SeaweedFS bucket): the bytes equal the objects, the view is read-only, a host sees its share,
and no mount or rclone process outlives the channel, not even a SIGKILLed agent."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests._support.seaweed import SeaweedS3
from tests._support.system import require
from tests.agent.channels._support import Host, channel, wait_until
from tests.agent.channels._views import fuse_mounts, seen_by_script
from trainops import StorageError
from trainops._settings import Settings
from trainops.agent._settings import AgentSettings
from trainops.agent.channels import FastFileChannel, assign_objects, open_channel
from trainops.agent.channels._rclone import fuse_problem
from trainops.storage import store_for


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _objects(count: int = 12) -> dict[str, bytes]:
    """Keys in folders, of sizes from empty to a few MiB (read-ahead crosses chunk bounds)."""
    sizes = [0, 1, 4095, 4096, 70_000, 3 * (1 << 20) + 5]
    return {
        f"part-{i % 3}/obj-{i:02d}.bin": os.urandom(sizes[i % len(sizes)]) for i in range(count)
    }


def _write_tree(root: Path, objects: dict[str, bytes]) -> None:
    for key, data in objects.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


@pytest.fixture
def local(tmp_path: Path) -> tuple[str, dict[str, bytes]]:
    objects = _objects()
    _write_tree(tmp_path / "dataset", objects)
    return (tmp_path / "dataset").as_uri(), objects


def _share_keys(
    uri: str, settings: Settings, hosts: list[str], host: str, **how: object
) -> set[str]:
    found = store_for(uri, settings).list_objects(uri)
    distribution = str(how.get("distribution", "ShardedByKey"))
    seed = how.get("shuffle_seed")
    share = assign_objects(
        found, hosts, host, distribution, seed if isinstance(seed, int) else None
    )
    return {info.key for info in share}


# file:// --------------------------------------------------------------------------------------


def test_file_view_reads_equal_the_objects_and_is_read_only(
    host: Host, local: tuple[str, dict[str, bytes]]
) -> None:
    uri, objects = local
    source = open_channel(channel(uri, mode="FastFile"), host.context())
    assert isinstance(source, FastFileChannel)
    source.prepare()
    target = host.data_dir / "train"
    seen = seen_by_script(target, source.binds(), try_write=True)
    assert seen["files"] == {key: _sha(data) for key, data in objects.items()}
    assert seen["write"] == errno.EROFS
    assert list(target.iterdir()) == []  # nothing copied into the host's tree
    source.close()


@pytest.mark.parametrize("seed", [None, 7])
def test_file_view_shows_each_host_its_share(
    tmp_path: Path, local: tuple[str, dict[str, bytes]], seed: int | None
) -> None:
    uri, objects = local
    hosts = ["algo-1", "algo-2", "algo-3"]
    seen: dict[str, set[str]] = {}
    for name in hosts:
        host = Host(tmp_path / "hosts", Settings(home=tmp_path), hosts, name)
        spec = channel(uri, mode="FastFile", distribution="ShardedByKey", shuffle_seed=seed)
        source = open_channel(spec, host.context())
        source.prepare()
        files = seen_by_script(host.data_dir / "train", source.binds(), try_write=True)
        assert files["write"] == errno.EROFS
        assert {k: objects[k] for k in files["files"]} == {
            k: v for k, v in objects.items() if k in files["files"]
        }
        assert all(files["files"][k] == _sha(objects[k]) for k in files["files"])
        seen[name] = set(files["files"])
        expected = _share_keys(uri, host.settings, hosts, name, shuffle_seed=seed)
        assert seen[name] == expected  # exactly what File mode would download here
        source.close()
    assert set().union(*seen.values()) == set(objects)
    assert sum(len(keys) for keys in seen.values()) == len(objects)  # disjoint


def test_file_manifest_view_shows_the_listed_objects(host: Host, tmp_path: Path) -> None:
    objects = _objects(6)
    _write_tree(tmp_path / "images", objects)
    listed = sorted(objects)[1:4]
    manifest = tmp_path / "train.manifest"
    manifest.write_text(json.dumps([{"prefix": (tmp_path / "images").as_uri() + "/"}, *listed]))
    spec = channel(manifest.as_uri(), mode="FastFile", s3_data_type="ManifestFile")
    source = open_channel(spec, host.context())
    source.prepare()
    seen = seen_by_script(host.data_dir / "train", source.binds())
    assert seen["files"] == {key: _sha(objects[key]) for key in listed}
    source.close()


def test_file_view_of_one_object(host: Host, tmp_path: Path) -> None:
    (tmp_path / "one.bin").write_bytes(b"abc")
    source = open_channel(channel((tmp_path / "one.bin").as_uri(), mode="FastFile"), host.context())
    source.prepare()
    assert seen_by_script(host.data_dir / "train", source.binds())["files"] == {
        "one.bin": _sha(b"abc")
    }
    source.close()


@pytest.mark.parametrize("distribution", ["ShardedByKey", "FullyReplicated"])
def test_a_link_out_of_the_prefix_is_never_shown(
    host: Host, tmp_path: Path, distribution: str
) -> None:
    (tmp_path / "secret").write_text("not data")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.bin").write_bytes(b"a")
    (data / "sub" / "escape").symlink_to(tmp_path / "secret")
    spec = channel(data.as_uri(), mode="FastFile", distribution=distribution)
    source = open_channel(spec, host.context())
    source.prepare()
    assert seen_by_script(host.data_dir / "train", source.binds())["files"] == {"a.bin": _sha(b"a")}
    source.close()


def test_an_empty_prefix_is_a_clear_error(host: Host, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    source = open_channel(channel((tmp_path / "empty").as_uri(), mode="FastFile"), host.context())
    with pytest.raises(StorageError, match=r"^channel 'train': no objects found under file://"):
        source.prepare()
    source.close()


# s3:// ----------------------------------------------------------------------------------------


@pytest.fixture
def rclone() -> Path:
    """rclone and fusermount3, or the test skipped (failed in CI) saying they are missing."""
    return require("rclone")


@pytest.fixture
def s3_host(tmp_path: Path, s3_server: SeaweedS3) -> Host:
    return Host(tmp_path / "hosts", s3_server.settings(tmp_path))


@pytest.fixture
def bucket(s3_server: SeaweedS3) -> tuple[str, dict[str, bytes]]:
    name = s3_server.create_bucket("fastfile")
    objects = _objects()
    client = s3_server.client()
    for key, data in objects.items():
        client.put_object(Bucket=name, Key=f"train/{key}", Body=data)
    client.put_object(Bucket=name, Key="training/not-in-the-prefix.bin", Body=b"no")
    return f"s3://{name}/train/", objects


@pytest.fixture(autouse=True)
def no_rclone_left() -> Iterator[None]:
    yield
    wait_until(lambda: not _rclones(), timeout=15)
    assert fuse_mounts() == []


def _rclones() -> list[psutil.Process]:
    mine = psutil.Process().children(recursive=True)
    return [p for p in mine if _named(p, "rclone")]


def _named(process: psutil.Process, name: str) -> bool:
    try:
        return process.name() == name
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_s3_view_reads_equal_the_objects(
    s3_host: Host, bucket: tuple[str, dict[str, bytes]], s3_server: SeaweedS3
) -> None:
    assert fuse_problem() is None, fuse_problem()
    uri, objects = bucket
    source = open_channel(channel(uri, mode="FastFile"), s3_host.context())
    assert isinstance(source, FastFileChannel)
    try:
        source.prepare()
        assert fuse_mounts() == []  # the mount lives in rclone's namespace, not the machine's
        seen = seen_by_script(s3_host.data_dir / "train", source.binds(), try_write=True)
        assert seen["files"] == {key: _sha(data) for key, data in objects.items()}
        assert seen["write"] == errno.EROFS
        pid = source.rclone_pid
        assert pid is not None
        cmdline = " ".join(psutil.Process(pid).cmdline())
        assert s3_server.secret_key not in cmdline and s3_server.access_key not in cmdline
    finally:
        source.close()
    assert not psutil.pid_exists(pid)  # stopped and reaped by close()
    assert source.binds() == ()


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_s3_view_shows_each_host_its_share(
    tmp_path: Path, s3_server: SeaweedS3, bucket: tuple[str, dict[str, bytes]]
) -> None:
    uri, objects = bucket
    hosts = ["algo-1", "algo-2"]
    union: set[str] = set()
    for name in hosts:
        host = Host(tmp_path / "hosts", s3_server.settings(tmp_path), hosts, name)
        spec = channel(uri, mode="FastFile", distribution="ShardedByKey", shuffle_seed=3)
        source = open_channel(spec, host.context())
        try:
            source.prepare()
            seen = seen_by_script(host.data_dir / "train", source.binds())["files"]
        finally:
            source.close()
        assert set(seen) == _share_keys(uri, host.settings, hosts, name, shuffle_seed=3)
        assert all(seen[k] == _sha(objects[k]) for k in seen)
        assert not union & set(seen)
        union |= set(seen)
    assert union == set(objects)


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_s3_empty_prefix_is_a_clear_error_and_rclone_ends(
    s3_host: Host, s3_server: SeaweedS3
) -> None:
    uri = f"s3://{s3_server.create_bucket('empty')}/nothing/"
    source = open_channel(channel(uri, mode="FastFile"), s3_host.context())
    with pytest.raises(StorageError, match=r"^channel 'train': no objects found under s3://"):
        source.prepare()
    source.close()


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_a_view_that_cannot_be_listed_is_not_called_empty(
    tmp_path: Path, s3_server: SeaweedS3, bucket: tuple[str, dict[str, bytes]]
) -> None:
    uri, _ = bucket
    wrong = dataclasses.replace(s3_server.s3_settings, secret_access_key="not-the-secret")
    host = Host(tmp_path / "hosts", Settings(home=tmp_path, s3=wrong))
    source = open_channel(channel(uri, mode="FastFile"), host.context())
    try:
        with pytest.raises(StorageError, match=r"the FastFile view failed: .*cannot list"):
            source.prepare()
    finally:
        source.close()


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_rclone_ending_mid_script_is_the_channels_failure(
    s3_host: Host, bucket: tuple[str, dict[str, bytes]]
) -> None:
    source = open_channel(channel(bucket[0], mode="FastFile"), s3_host.context())
    assert isinstance(source, FastFileChannel)
    try:
        source.prepare()
        assert source.failure is None
        pid = source.rclone_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: source.failure is not None)
        assert str(source.failure).startswith("channel 'train': rclone ended (exit -9)")
    finally:
        source.close()


_AGENT = """
import sys, time
from pathlib import Path
from tests.agent.channels._support import Host, channel
from trainops._settings import S3Settings, Settings
from trainops.agent.channels import open_channel
root, endpoint, key, secret, uri = sys.argv[1:6]
s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id=key, secret_access_key=secret)
host = Host(Path(root), Settings(home=Path(root), s3=s3))
source = open_channel(channel(uri, mode="FastFile"), host.context())
source.prepare()
print(source.rclone_pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.usefixtures("rclone")
def test_a_sigkilled_agent_leaves_no_mount_and_no_rclone(
    tmp_path: Path, s3_server: SeaweedS3, bucket: tuple[str, dict[str, bytes]]
) -> None:
    args = [str(tmp_path / "agent"), s3_server.endpoint_url, s3_server.access_key]
    args += [s3_server.secret_key, bucket[0]]
    command = [sys.executable, "-c", _AGENT, *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as agent:
        try:
            assert agent.stdout is not None
            rclone = psutil.Process(int(agent.stdout.readline()))
            namespace = os.stat(f"/proc/{rclone.pid}/ns/mnt").st_ino
            agent.send_signal(signal.SIGKILL)
            agent.wait(10)
            rclone.wait(15)  # the kernel's parent-death signal ended it with the agent
        finally:
            agent.kill()
    assert fuse_mounts() == []
    assert all(_namespace_of(p) != namespace for p in psutil.process_iter())


def _namespace_of(process: psutil.Process) -> int | None:
    try:
        return os.stat(f"/proc/{process.pid}/ns/mnt").st_ino
    except OSError:
        return None


@pytest.mark.slow
@pytest.mark.s3
def test_without_rclone_the_job_fails_naming_the_channel_or_falls_back(
    tmp_path: Path,
    s3_server: SeaweedS3,
    bucket: tuple[str, dict[str, bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    monkeypatch.setenv("PATH", str(no_tools))  # a machine where rclone is not installed
    uri, objects = bucket
    host = Host(tmp_path / "hosts", s3_server.settings(tmp_path))
    source = open_channel(channel(uri, mode="FastFile"), host.context())
    with pytest.raises(StorageError) as caught:
        source.prepare()
    assert str(caught.value).startswith("channel 'train': FastFile mode on s3:// needs FUSE")
    assert "rclone is not installed" in str(caught.value)
    source.close()
    settings = Settings(
        home=tmp_path, s3=s3_server.s3_settings, agent=AgentSettings(fastfile_fallback=True)
    )
    host = Host(tmp_path / "fallback", settings)
    source = open_channel(channel(uri, mode="FastFile"), host.context())
    source.prepare()
    downloaded = host.data_dir / "train"
    assert {str(p.relative_to(downloaded)) for p in downloaded.rglob("*.bin")} == set(objects)
    assert any("downloading it (File mode)" in line for line in host.lines)
    source.close()


def test_a_key_that_cannot_be_a_file_name_in_a_share_is_refused(host: Host, tmp_path: Path) -> None:
    data = tmp_path / "hostile"
    data.mkdir()
    (data / "fine.bin").write_bytes(b"a")
    (data / "line\nbreak.bin").write_bytes(b"b")  # a legal file name, but not a line of a list
    spec = channel(data.as_uri(), mode="FastFile", distribution="ShardedByKey")
    source = open_channel(spec, host.context())
    with pytest.raises(StorageError) as caught:
        source.prepare()
    assert str(caught.value).startswith("channel 'train': object key 'line\\nbreak.bin' cannot")
    source.close()
    assert not (host.root / "algo-1" / "scratch" / "fastfile" / "train").exists()


def test_the_fallback_is_off_unless_the_machine_allows_it(tmp_path: Path) -> None:
    home = {"TRAINOPS_HOME": str(tmp_path)}
    assert Settings.load(home).fastfile_fallback is False
    assert Settings.load({**home, "TRAINOPS_FASTFILE_FALLBACK": "1"}).fastfile_fallback is True
    (tmp_path / "config.yaml").write_text("fastfile_fallback: 1\n")
    assert Settings.load(home).fastfile_fallback is True
