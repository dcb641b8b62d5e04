"""The copy of a job's debug-output prefix that a custom rule reads (``rules._mirror``): an
index only after its event file, the end marker last, only the trial's names, bounded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.debugger_rules._series import Series, write_series
from trainops._settings import Settings
from trainops.debugger import create_trial
from trainops.rules._mirror import MirrorError, PrefixMirror
from trainops.storage import store_for
from trainops.storage._file import FileStore

STEP = "000000000003"
EVENT = f"events/{STEP}/{STEP}_worker_0.tfevents"
INDEX = f"index/000000000/{STEP}_worker_0.json"


def _mirror(tmp_path: Path, **bounds: int) -> tuple[PrefixMirror, Path, Path]:
    prefix, dest = tmp_path / "prefix", tmp_path / "copy"
    prefix.mkdir(parents=True)
    store = store_for(prefix.as_uri(), Settings(home=tmp_path / "home"))
    return PrefixMirror(prefix.as_uri(), store, dest, **bounds), prefix, dest


def _steps(prefix: Path, count: int, *, end: bool = False) -> None:
    series = Series()
    for step in range(count):
        series.add(step, **{"fc.weight": np.full((2, 2), step, np.float32)})
    write_series(prefix, series, end=end)


def test_the_copy_is_read_as_a_trial_and_grows_with_the_prefix(tmp_path: Path) -> None:
    mirror, prefix, dest = _mirror(tmp_path)
    _steps(prefix, 2)
    assert mirror.refresh() == 5  # the collections file, two event files, two index files
    assert create_trial(str(dest)).steps() == [0, 1]
    _steps(prefix, 4)  # two more steps (the first two rewritten alike)
    assert mirror.refresh() == 4
    trial = create_trial(str(dest))
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.tensor("fc.weight").value(3).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert not any(p.name.startswith(".") for p in dest.rglob("*"))  # no temporary left


def test_an_index_waits_for_its_event_file(tmp_path: Path) -> None:
    mirror, prefix, dest = _mirror(tmp_path)
    _steps(prefix, 4)
    (prefix / EVENT).unlink()
    mirror.refresh()
    assert not (dest / INDEX).exists() and (dest / "index/000000000").is_dir()
    _steps(prefix, 4)
    mirror.refresh()
    assert (dest / INDEX).exists() and (dest / EVENT).exists()


def test_the_end_marker_comes_a_refresh_after_it_was_first_listed(tmp_path: Path) -> None:
    mirror, prefix, dest = _mirror(tmp_path)
    _steps(prefix, 1, end=True)
    mirror.refresh()
    assert not (dest / "training_job_end.ts").exists()  # pages listed before it may be stale
    mirror.refresh()
    assert (dest / "training_job_end.ts").exists()
    assert create_trial(str(dest)).steps() == [0]


def test_only_the_names_a_trial_reads_are_copied(tmp_path: Path) -> None:
    mirror, prefix, dest = _mirror(tmp_path)
    _steps(prefix, 1)
    for hostile in ("notes.txt", "index/000000000/x.json", "collections/000000000/a b.json"):
        (prefix / hostile).write_bytes(b"{}")
    (prefix / "index/000000000/000000000005_..json").write_bytes(b"{}")  # its event: absent
    mirror.refresh()
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert copied == [
        "collections/000000000/worker_0_collections.json",
        "events/000000000000/000000000000_worker_0.tfevents",
        "index/000000000/000000000000_worker_0.json",
    ]


def test_an_object_or_a_prefix_past_the_bounds_is_one_line(tmp_path: Path) -> None:
    mirror, prefix, _ = _mirror(tmp_path, max_object_bytes=2000)
    _steps(prefix, 1)
    (prefix / EVENT).parent.mkdir(parents=True)
    (prefix / EVENT).write_bytes(b"x" * 2001)
    (prefix / INDEX).write_bytes(b"{}")
    with pytest.raises(MirrorError, match=r"000000000003_worker_0.tfevents: 2001 bytes, over"):
        mirror.refresh()
    total, prefix2, _ = _mirror(tmp_path / "b", max_total_bytes=200)
    _steps(prefix2, 20)
    with pytest.raises(MirrorError, match="pass 200 bytes in all"):
        total.refresh()


def test_one_refresh_copies_a_bounded_number_of_files(tmp_path: Path) -> None:
    mirror, prefix, dest = _mirror(tmp_path, max_files=5)
    _steps(prefix, 6)
    assert mirror.refresh() == 5  # the collections file and two steps
    assert create_trial(str(dest)).steps() == [0, 1]
    assert mirror.refresh() == 4
    assert mirror.refresh() == 4
    assert create_trial(str(dest)).steps() == list(range(6))


class _GrowingStore(FileStore):
    """A real file store over a prefix whose job makes each event file bigger right after it
    was listed (the race a hostile job could try)."""

    def download(self, uri: str, dest: Path, expected_size: int | None = None) -> None:
        if uri.endswith(".tfevents"):
            with open(uri.removeprefix("file://"), "ab") as grown:
                grown.write(b"x" * 5000)
        super().download(uri, dest, None)


def test_an_object_grown_after_its_listing_is_refused_as_copied(tmp_path: Path) -> None:
    prefix, dest = tmp_path / "prefix", tmp_path / "copy"
    _steps(prefix, 1)
    mirror = PrefixMirror(prefix.as_uri(), _GrowingStore(), dest, max_object_bytes=2000)
    with pytest.raises(MirrorError, match=r"000000000000_worker_0.tfevents: \d+ bytes, over"):
        mirror.refresh()
    assert not (dest / "events/000000000000/000000000000_worker_0.tfevents").exists()
    assert not (dest / "index/000000000/000000000000_worker_0.json").exists()
