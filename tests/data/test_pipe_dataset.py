"""PipeModeDataset against real FIFOs fed by a writer thread, as the agent feeds them."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import get_args

import pytest
import torch.utils.data

from tests.data._streams import FifoWriter, pipe_env, write_input_config
from trainops.data import (
    CorruptRecordError,
    PipeChannelError,
    PipeModeDataset,
    recordio_frame,
    tfrecord_frame,
)
from trainops.data.pipe._dataset import RECORD_FORMATS, RecordFormat

EPOCHS = [[b"a0", b"bb0", b"c" * 70_000], [b"x1", b"", b"yy1"]]


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job tree with channel ``train`` in Pipe mode; returns the folder of its FIFOs."""
    for name, value in pipe_env(tmp_path / "opt-ml", "train").items():
        monkeypatch.setenv(name, value)
    return tmp_path / "opt-ml" / "input" / "data"


def _serve(folder: Path, epochs: list[bytes]) -> FifoWriter:
    writer = FifoWriter(folder, "train", epochs)
    writer.start()
    return writer


def _done(writer: FifoWriter) -> None:
    writer.join(timeout=30)
    assert not writer.is_alive() and writer.error is None


def test_each_iteration_reads_the_next_epochs_fifo(job: Path) -> None:
    writer = _serve(job, [b"".join(map(recordio_frame, e)) for e in EPOCHS])
    dataset = PipeModeDataset("train")
    assert [list(dataset), list(dataset)] == EPOCHS
    _done(writer)


def test_the_epoch_counter_is_shared_by_datasets_and_processes(job: Path) -> None:
    writer = _serve(job, [b"".join(map(recordio_frame, e)) for e in EPOCHS])
    assert list(PipeModeDataset("train")) == EPOCHS[0]
    assert list(PipeModeDataset("train")) == EPOCHS[1]  # a new object: epoch 1, not 0 again
    _done(writer)
    state = job.parent.parent / "pipe_state" / ".train-pipe_mode-state"
    assert state.read_text() == "2"


def test_tfrecord_and_text_lines(job: Path) -> None:
    lines = b"first line\nsecond\r\nlast without newline"
    writer = _serve(job, [b"".join(map(tfrecord_frame, EPOCHS[0])), lines])
    assert list(PipeModeDataset("train", "TFRecord")) == EPOCHS[0]
    assert list(PipeModeDataset("train", "TextLine")) == [
        "first line",
        "second",
        "last without newline",
    ]
    _done(writer)


def test_batches_are_lists_of_records(job: Path) -> None:
    writer = _serve(job, [b"".join(map(recordio_frame, EPOCHS[0]))])
    assert list(PipeModeDataset("train", batch_size=2)) == [EPOCHS[0][:2], EPOCHS[0][2:]]
    _done(writer)


def test_the_reader_waits_for_a_fifo_that_appears_late(job: Path) -> None:
    def late() -> None:
        time.sleep(0.3)
        _serve(job, [recordio_frame(b"late")]).join(timeout=30)

    thread = threading.Thread(target=late)
    thread.start()
    assert list(PipeModeDataset("train")) == [b"late"]
    thread.join(timeout=30)


def test_an_empty_epoch_ends_at_once(job: Path) -> None:
    writer = _serve(job, [b"", recordio_frame(b"next")])
    dataset = PipeModeDataset("train")
    assert list(dataset) == [] and list(dataset) == [b"next"]
    _done(writer)


def test_a_fifo_that_never_appears_times_out_with_its_name(job: Path) -> None:
    with pytest.raises(PipeChannelError, match=r"channel train, epoch 0: .*train_0 did not appear"):
        list(PipeModeDataset("train", timeout=0.2))


def test_a_fifo_whose_writer_never_comes_times_out(job: Path) -> None:
    os.mkfifo(job / "train_0")
    with pytest.raises(PipeChannelError, match="no writer sent anything"):
        list(PipeModeDataset("train", timeout=0.2))


def test_leaving_an_epoch_early_closes_its_fifo(job: Path) -> None:
    big = b"".join(recordio_frame(b"r" * 1000) for _ in range(5000))  # more than a pipe holds
    writer = _serve(job, [big, recordio_frame(b"epoch 1")])
    dataset = PipeModeDataset("train")
    assert next(iter(dataset)) == b"r" * 1000
    assert list(dataset) == [b"epoch 1"]  # the writer saw the reader go and moved on
    _done(writer)


def test_a_corrupt_record_names_channel_epoch_and_offset(job: Path) -> None:
    good = recordio_frame(b"good")
    writer = _serve(job, [good, good + b"\x00" * 8 + good])
    assert list(PipeModeDataset("train")) == [b"good"]
    with pytest.raises(
        CorruptRecordError, match=r"channel train, epoch 1: corrupt record at byte 12"
    ):
        list(PipeModeDataset("train"))
    _done(writer)


def test_max_corrupt_skips_and_counts_in_the_log(
    job: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = recordio_frame(b"good")
    writer = _serve(job, [good + b"\xff" * 8 + good])
    with caplog.at_level(logging.WARNING, logger="trainops.data"):
        assert list(PipeModeDataset("train", max_corrupt=1)) == [b"good", b"good"]
    assert "channel train, epoch 0: skipped 1 corrupt record" in caplog.text
    _done(writer)


def test_a_regular_file_stands_in_for_a_fifo(job: Path) -> None:
    (job / "train_0").write_bytes(recordio_frame(b"from a file"))
    assert list(PipeModeDataset("train")) == [b"from a file"]


def test_a_link_in_place_of_the_fifo_is_refused(job: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_bytes(recordio_frame(b"secret"))
    (job / "train_0").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PipeChannelError, match="cannot open"):
        list(PipeModeDataset("train"))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "inputdataconfig.json: cannot read"),
        ({"other": {"TrainingInputMode": "Pipe"}}, "no channel 'train'.*channels: other"),
        ({"train": {"TrainingInputMode": "File"}}, "channel 'train' is in File mode"),
        ({"train": "Pipe"}, "expected an object of channels"),
    ],
)
def test_a_channel_not_in_pipe_mode_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: object, message: str
) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    if config is not None:
        write_input_config(folder, config)  # type: ignore[arg-type]
    monkeypatch.setenv("SM_INPUT_CONFIG_DIR", str(folder))
    with pytest.raises(PipeChannelError, match=message):
        PipeModeDataset("train")


def test_bad_arguments_are_named(job: Path) -> None:
    with pytest.raises(PipeChannelError, match="not a channel name"):
        PipeModeDataset("../train")
    with pytest.raises(
        ValueError,
        match=r"^record_format: unknown record format 'CSV' \(known: RecordIO, TFRecord, TextLine\)$",
    ):
        PipeModeDataset("train", "CSV")  # type: ignore[arg-type]


def test_the_typed_record_formats_are_the_registered_ones() -> None:
    assert get_args(RecordFormat) == RECORD_FORMATS.names()


def test_a_damaged_epoch_counter_is_named(job: Path) -> None:
    state = job.parent.parent / "pipe_state"
    state.mkdir()
    (state / ".train-pipe_mode-state").write_text("seven")
    with pytest.raises(PipeChannelError, match=r"-pipe_mode-state: not an epoch number"):
        list(PipeModeDataset("train"))


@pytest.mark.slow
def test_one_dataloader_worker_reads_the_fifo(job: Path) -> None:
    writer = _serve(job, [b"".join(map(recordio_frame, e)) for e in EPOCHS])
    dataset: torch.utils.data.IterableDataset[bytes] = PipeModeDataset("train")  # type: ignore[assignment]
    for epoch in EPOCHS:  # a fresh worker each epoch: the shared counter moves on
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1)
        assert list(loader) == epoch
    _done(writer)


@pytest.mark.slow
def test_two_dataloader_workers_are_refused(job: Path) -> None:
    dataset: torch.utils.data.IterableDataset[bytes] = PipeModeDataset("train")  # type: ignore[assignment]
    batches = iter(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2))
    with pytest.raises(ValueError, match="num_workers 0 or 1") as refused:
        next(batches)
    # Its workers ended now, not when the garbage collector meets the traceback's cycle (a
    # collected DataLoader iterator waits 5 s for a worker, in whichever later test).
    refused.value.__traceback__ = None
    del refused, batches
