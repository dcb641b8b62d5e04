"""The channel-source contract, for every kind registered in ``KINDS``.

A new kind adds a :class:`KindCase` to :data:`CASES` (how to make a working spec of it from a
``file://`` prefix, and how to tell that it prepared something for the script: from the host's
``input/data`` and the source, whose binds a script would see); the first test fails until it
does. Every test also checks that nothing the source started is left running.
"""

from __future__ import annotations

import dataclasses
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.agent.channels._support import Host, channel, threads_now
from tests.agent.channels._views import filesystem_channel, sees_files
from trainops import StorageError
from trainops.agent.channels import KINDS, ChannelSource, open_channel
from trainops.protocol import ChannelSpec
from trainops.spec import InputMode


@dataclass(frozen=True)
class KindCase:
    spec: Callable[[str], ChannelSpec]  # a working channel "train" reading the prefix at uri
    prepared: Callable[[Path, ChannelSource], bool]  # does the script see something to read?


def _has_files(data_dir: Path) -> bool:
    return any(p.is_file() for p in (data_dir / "train").rglob("*"))


def _has_first_fifo(data_dir: Path) -> bool:
    path = data_dir / "train_0"
    return path.exists() and stat.S_ISFIFO(path.lstat().st_mode)


def _shows_files(data_dir: Path, source: ChannelSource) -> bool:
    return sees_files(data_dir / "train", source.binds())


CASES: dict[str, KindCase] = {
    "File": KindCase(lambda uri: channel(uri), lambda d, _s: _has_files(d)),
    "Pipe": KindCase(lambda uri: channel(uri, mode="Pipe"), lambda d, _s: _has_first_fifo(d)),
    "FastFile": KindCase(lambda uri: channel(uri, mode="FastFile"), _shows_files),
    "FileSystem": KindCase(
        lambda uri: filesystem_channel(uri.removeprefix("file://")), _shows_files
    ),
}


@pytest.fixture(params=KINDS.names())
def case(request: pytest.FixtureRequest) -> KindCase:
    kind: str = request.param
    if kind not in CASES:
        pytest.fail(f"no conformance case for the {kind} channel kind: add one to {__file__}")
    return CASES[kind]


@pytest.fixture
def dataset(tmp_path: Path) -> str:
    data = tmp_path / "dataset"
    for i in range(40):
        (data / f"part-{i // 10}").mkdir(parents=True, exist_ok=True)
        (data / f"part-{i // 10}" / f"{i:03d}.bin").write_bytes(bytes([i]) * (1000 + i))
    return data.as_uri()


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    before = threads_now()
    children = {p.pid for p in psutil.Process().children(recursive=True)}  # a test server, say
    yield
    deadline = time.monotonic() + 5
    while threads_now() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [t.name for t in threads_now() - before] == []
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in children]
    assert new == []


def _fifos(data_dir: Path) -> list[str]:
    return [p.name for p in data_dir.rglob("*") if stat.S_ISFIFO(p.lstat().st_mode)]


def _source(case: KindCase, host: Host, uri: str) -> ChannelSource:
    return open_channel(case.spec(uri), host.context())


def test_every_registered_kind_has_a_case() -> None:
    assert set(CASES) == set(KINDS)


def test_every_input_mode_the_spec_accepts_has_a_kind() -> None:
    assert {mode.value for mode in InputMode} <= set(KINDS.names())


def test_an_unregistered_kind_is_refused_naming_the_channel_and_the_known_kinds(
    host: Host, dataset: str
) -> None:
    spec = dataclasses.replace(channel(dataset), mode="Tape")
    with pytest.raises(
        StorageError, match=r"^channel 'train': unknown channel kind 'Tape' \(known: File, "
    ):
        open_channel(spec, host.context())


def test_prepare_then_close(case: KindCase, host: Host, dataset: str) -> None:
    source = _source(case, host, dataset)
    source.prepare()
    assert case.prepared(host.data_dir, source)
    assert list(source.binds()) == [] or all(b.read_only for b in source.binds())
    source.close()
    assert _fifos(host.data_dir) == []


def test_close_after_a_failed_prepare(case: KindCase, host: Host, tmp_path: Path) -> None:
    source = _source(case, host, (tmp_path / "missing").as_uri())
    with pytest.raises(StorageError, match="'train'"):
        source.prepare()
    source.close()
    assert not case.prepared(host.data_dir, source)
    assert _fifos(host.data_dir) == []


def test_close_twice_is_harmless(case: KindCase, host: Host, dataset: str) -> None:
    source = _source(case, host, dataset)
    source.prepare()
    source.close()
    source.close()


def test_close_without_prepare_is_harmless(case: KindCase, host: Host, dataset: str) -> None:
    _source(case, host, dataset).close()


def test_a_stop_while_preparing_ends_it(case: KindCase, host: Host, dataset: str) -> None:
    host.stop.set()  # the job is being stopped by the time the channel is prepared
    source = _source(case, host, dataset)
    try:
        source.prepare()
    except StorageError as exc:
        assert "'train'" in str(exc)
    finally:
        source.close()
    assert not case.prepared(host.data_dir, source)
    assert _fifos(host.data_dir) == []
