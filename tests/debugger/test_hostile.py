"""A job's files are untrusted: every read is bounded, and a bad file is one clear error that
names it (and the byte, for an event file), never a traceback from deep inside or a huge read."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from trainops._protowire import len_field, varint_field
from trainops.debugger import (
    Collection,
    CollectionManager,
    DebugFormatError,
    MissingCollectionFiles,
    create_trial,
    modes,
)
from trainops.debugger.format import (
    IndexLimits,
    TensorFileWriter,
    encode_tensor_event,
    event_file_key,
    index_key,
)
from trainops.debugger.format._records import frame_record
from trainops.debugger.trial import LocalSource, Trial, TrialLimits


def write_index(root: Path, step: int, data: object) -> Path:
    path = root / index_key(step, "worker_0")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def index_for(event_file: str, length: int, start: int = 0) -> dict[str, object]:
    return {
        "meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
        "tensor_payload": [{"tensorname": "w", "start_idx": start, "length": length}],
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "must be an object with a 'meta' object"),
        ({"meta": {"mode": "NOPE", "mode_step": 0}}, "mode 'NOPE' is not one of"),
        ({"meta": {"mode": "TRAIN", "mode_step": -1}}, "meta.mode_step must be an integer"),
        ({"meta": {"mode": "TRAIN", "mode_step": 0}, "tensor_payload": [{}]}, "tensorname"),
        (index_for("events/x.tfevents", 1 << 40), "length must be an integer from 0"),
        (index_for("../../outside.tfevents", 30), "is not events/"),
        (index_for("/etc/passwd", 30), "is not events/"),
        (index_for("events/../../x.tfevents", 30), "is not events/"),
        (
            {
                "meta": {"mode": "TRAIN", "mode_step": 0},
                "shape_payload": [{"tensorname": "w", "shape": [1] * 40}],
            },
            "at most 32 sizes",
        ),
    ],
)
def test_a_bad_index_is_left_out_and_named_once(tmp_path: Path, data: object, message: str) -> None:
    TensorFileWriter(tmp_path, "worker_0").write_step(1, modes.TRAIN, 1, [("w", np.ones(2))])
    path = write_index(tmp_path, 0, data)
    trial = create_trial(tmp_path)
    assert trial.steps() == [1]  # the good step is there; the bad one is not
    (error,) = trial.errors
    assert str(path) in error and "\n" not in error
    assert re.search(message, error), error


def test_an_index_larger_than_the_limit_is_not_read(tmp_path: Path) -> None:
    write_index(tmp_path, 0, {"meta": {"mode": "TRAIN", "mode_step": 0}, "pad": "x" * 5000})
    trial = Trial(LocalSource(tmp_path), limits=TrialLimits(index=IndexLimits(max_bytes=4096)))
    assert trial.steps() == [] and "larger than the 4096-byte limit" in trial.errors[0]


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / index_key(0, "worker_0")
    path.parent.mkdir(parents=True)
    path.write_text("[" * 200_000)
    assert "not valid JSON" in create_trial(tmp_path).errors[0]


def test_a_symlinked_index_out_of_the_trial_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "trial"
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(index_for("events/x.tfevents", 30)))
    link = root / index_key(0, "worker_0")
    link.parent.mkdir(parents=True)
    os.symlink(secret, link)
    trial = create_trial(root)
    assert trial.steps() == [] and "leads outside the trial's directory" in trial.errors[0]


def test_a_bad_collections_file_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "collections/000000000/worker_0_collections.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"collections": {}, "_meta": {"num_workers": 10**9}}))
    trial = create_trial(tmp_path)
    assert trial.num_workers == 1 and "num_workers" in trial.errors[0]


def put_event(root: Path, payload: bytes, before: bytes = b"") -> str:
    key = event_file_key(0, "worker_0")
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(before + frame_record(payload))
    return key


def test_a_tensor_claiming_too_many_elements_is_refused(tmp_path: Path) -> None:
    dims = b"".join(len_field(2, varint_field(1, 1 << 20)) for _ in range(3))
    tensor = varint_field(1, 1) + len_field(2, dims) + len_field(4, b"\0" * 8)
    value = len_field(1, b"w") + len_field(8, tensor)
    payload = len_field(5, len_field(1, value))
    key = put_event(tmp_path, payload)
    write_index(tmp_path, 0, index_for(key, len(payload) + 16))
    with pytest.raises(DebugFormatError, match=rf"{key}: record at byte 0: .*exceeds \d+ elements"):
        create_trial(tmp_path).tensor("w").value(0)


def test_garbage_in_an_event_names_the_file_and_the_record(tmp_path: Path) -> None:
    """One offset, the right one: the bad record's byte in the event file (not the offset
    within a nested message after it, which read as a second, wrong, file offset)."""
    cut = encode_tensor_event("w", np.ones(3), 0, modes.TRAIN, 0, 1.0)[:-10]  # a field runs over
    before = frame_record(encode_tensor_event("v", np.ones(2), 0, modes.TRAIN, 0, 1.0))
    key = put_event(tmp_path, cut, before)
    write_index(tmp_path, 0, index_for(key, len(cut) + 16, start=len(before)))
    with pytest.raises(DebugFormatError) as info:
        create_trial(tmp_path).tensor("w").value(0)
    message = f"{tmp_path}/{key}: record at byte {len(before)}: field of "
    assert (
        str(info.value).startswith(message) and len(re.findall(r"\bbyte \d", str(info.value))) == 1
    )


def test_an_index_pointing_past_the_file_is_cut_short(tmp_path: Path) -> None:
    TensorFileWriter(tmp_path, "worker_0").write_step(0, modes.TRAIN, 0, [("w", np.ones(3))])
    key = event_file_key(0, "worker_0")
    write_index(tmp_path, 0, index_for(key, 16, start=10_000))
    with pytest.raises(DebugFormatError, match=rf"{key}: byte 10000: no complete record there$"):
        create_trial(tmp_path).tensor("w").value(0)


def test_a_step_claiming_more_bytes_than_the_limit_is_left_out(tmp_path: Path) -> None:
    entries = [{"tensorname": f"t{i}", "start_idx": 0, "length": 1 << 29} for i in range(40)]
    meta = {"mode": "TRAIN", "mode_step": 0, "event_file_name": "events/x.tfevents"}
    write_index(tmp_path, 0, {"meta": meta, "tensor_payload": entries})
    trial = create_trial(tmp_path)
    assert trial.steps() == [] and "add up to 21474836480 bytes" in trial.errors[0]


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "((ab)*)*", "(a|a)*$", ".*a.*a.*a.*b", "(x{1,100}){2,}", ".*a.{0,1000}b.*c"],
)
def test_a_job_cannot_hand_the_reader_a_regex_that_blows_up(tmp_path: Path, pattern: str) -> None:
    manager = CollectionManager([Collection("evil", include_regex=[pattern])])
    TensorFileWriter(tmp_path, "worker_0").write_collections(manager)
    TensorFileWriter(tmp_path, "worker_0").write_step(0, modes.TRAIN, 0, [("a" * 1000, np.ones(1))])
    trial = create_trial(tmp_path)
    assert "include_regex" in trial.errors[0]
    with pytest.raises(MissingCollectionFiles):
        trial.tensor_names(collection="evil")


@pytest.mark.parametrize(
    "pattern", [".*relu_output", "fc.*weight", ".*conv.*", "^layer[0-9]+\\.bias$"]
)
def test_ordinary_collection_regexes_are_read(tmp_path: Path, pattern: str) -> None:
    manager = CollectionManager([Collection("fine", include_regex=[pattern])])
    TensorFileWriter(tmp_path, "worker_0").write_collections(manager)
    trial = create_trial(tmp_path)
    assert trial.errors == [] and trial.collection("fine").include_regex == [pattern]


def test_a_trial_keeps_track_of_a_bounded_number_of_records(tmp_path: Path) -> None:
    writer = TensorFileWriter(tmp_path, "worker_0", sync=False)
    for step in range(4):
        writer.write_step(step, modes.TRAIN, step, [(f"t{i}", np.ones(1)) for i in range(10)])
    trial = Trial(LocalSource(tmp_path), limits=TrialLimits(max_records=25))
    assert trial.steps() == [0, 1]
    assert "more than 25 records held; step 2 of worker_0 is left out" in trial.errors[0]


def test_indexes_awaiting_their_event_files_count_against_the_record_cap(tmp_path: Path) -> None:
    """An index whose event file is not there is kept, parsed, for the next refreshes: a job
    writing many such indexes must not make the reader hold more than its cap."""
    for step in range(5):
        write_index(tmp_path, step, index_for(event_file_key(step, "worker_0"), 16))
    trial = Trial(LocalSource(tmp_path), limits=TrialLimits(max_records=5))
    assert trial.steps(show_incomplete_steps=True) == []
    assert len(trial.errors) == 3  # two indexes of 2 records each wait; the others are left out
    assert all("records held with those awaiting their event files" in e for e in trial.errors)
