"""Channel names become directories: '.' and '..' are refused by the spec and again by the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops import SpecError, StorageError
from trainops._settings import Settings
from trainops.agent import download_channel
from trainops.protocol import ChannelSpec
from trainops.spec import Channel, parse_spec
from trainops.storage import store_for


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused_with_their_line(name: str) -> None:
    text = f"entry_point: train.py\ninputs:\n  '{name}': s3://b/x/\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    [(path, reason)] = info.value.problems
    assert path == "inputs (line 2)" and f"channel name {name!r}" in reason


@pytest.mark.parametrize("name", [".", "..", "a/../..", ""])
def test_the_agent_refuses_them_before_writing(tmp_path: Path, name: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "payload.txt").write_text("x")
    channel_root = tmp_path / "root" / "input" / "data"
    channel_root.mkdir(parents=True)
    store = store_for(data.as_uri(), Settings(home=tmp_path))
    with pytest.raises(StorageError, match="not a valid channel directory name"):
        download_channel(
            store,
            # Built by hand: the spec would refuse the name before an agent ever saw it.
            ChannelSpec.from_json(name, Channel(data.as_uri()).model_dump(mode="json")),
            channel_root / name,
            hosts=["algo-1"],
            current_host="algo-1",
            log=print,
        )
    assert not list((tmp_path / "root").rglob("payload.txt"))
