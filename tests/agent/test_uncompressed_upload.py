"""Uncompressed outputs at the agent: files under the prefix, an earlier attempt's leftovers
removed, and symbolic links named in the log (at most ten by name) but never followed."""

from __future__ import annotations

from pathlib import Path

from trainops._settings import Settings
from trainops.agent.contract._outputs import OutputLayout, upload_archives
from trainops.agent.contract._tree import HostTree
from trainops.storage import store_for


def test_files_go_up_leftovers_go_and_links_are_named_not_followed(tmp_path: Path) -> None:
    tree = HostTree(tmp_path / "root")
    tree.model_dir.mkdir(parents=True)
    (tree.model_dir / "weights.bin").write_bytes(b"w" * 1000)
    secret = tmp_path / "secret.txt"
    secret.write_text("not the job's")
    for i in range(12):
        (tree.model_dir / f"link-{i:02d}").symlink_to(secret)
    prefix = tmp_path / "out" / "job"
    left = prefix / "output" / "model" / "from-attempt-1.bin"
    left.parent.mkdir(parents=True)
    left.write_text("stale")
    lines: list[str] = []
    store = store_for(prefix.as_uri(), Settings(home=tmp_path / "home"))
    layout = OutputLayout(prefix.as_uri(), "algo-1", 1, 2, compressed=False)
    artifacts = upload_archives(store, tree, layout, tmp_path / "work", lines.append)
    assert [(a.name, a.uri) for a in artifacts] == [
        ("model", (prefix / "output" / "model").as_uri() + "/"),
        ("output", (prefix / "output" / "data").as_uri() + "/"),
    ]
    uploaded = sorted(p.name for p in (prefix / "output" / "model").iterdir())
    assert uploaded == ["weights.bin"]  # no link followed, the stale file gone
    assert lines[:2] == [
        "'model/link-00' is a symbolic link: not uploaded (outputs go up uncompressed)",
        "'model/link-01' is a symbolic link: not uploaded (outputs go up uncompressed)",
    ]
    assert len(lines) == 11 and lines[-1] == "... and 2 more symbolic links, not uploaded either"
