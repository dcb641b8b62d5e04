"""Histograms, HParams sessions and the hook's per-mode layout, read back by TensorBoard,
tbparse and TensorFlow, and equal to the bytes TensorFlow's own histogram op writes."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import plugin_data_pb2, summary_v2

from tests._support.system import require_extra
from trainops.tensorboard import (
    DEFAULT_BUCKET_LIMITS,
    SESSION_END_TAG,
    SESSION_START_TAG,
    SessionStatus,
    StepSummaries,
    SummaryWriter,
    histogram_of,
    session_end_event,
    session_start_event,
)

RNG = np.random.default_rng(7)


def _accumulator(logdir: Path) -> event_accumulator.EventAccumulator:
    guidance = {"histograms": 0, "compressedHistograms": 0, "tensors": 0, "scalars": 0}
    accumulator = event_accumulator.EventAccumulator(str(logdir), size_guidance=guidance)
    accumulator.Reload()
    return accumulator


def test_the_default_buckets_are_tensorflows() -> None:
    limits = DEFAULT_BUCKET_LIMITS
    assert len(limits) == 1551  # 775 edges each side of 0
    assert limits[775] == 0.0 and limits[776] == 1e-12
    assert limits[-1] == -limits[0] == 1.7976931348623157e308
    assert all(a < b for a, b in itertools.pairwise(limits))


@pytest.mark.parametrize(
    "values",
    [
        RNG.normal(size=1000).astype(np.float32),
        RNG.normal(scale=1e15, size=50),  # wide: sums that pairwise summation would round apart
        np.array([-0.0, 1e-13, -1e-13, 1e19, 3e20]),  # around zero, beyond the last edge
        np.arange(-5, 5, dtype=np.int8),
        np.array([True, False, True]),
        np.array([[2.5]]),
    ],
)
def test_histogram_bytes_equal_tensorflows_histogram_op(values: np.ndarray) -> None:
    tf = require_extra("tensorflow")
    op = tf.raw_ops.HistogramSummary(tag="t", values=values).numpy()
    expected = summary_pb2.Summary.FromString(op).value[0].histo.SerializeToString()
    histogram = histogram_of(values)
    assert histogram is not None
    assert histogram.encode() == expected


def test_each_value_falls_in_the_first_bucket_whose_limit_is_above_it() -> None:
    histogram = histogram_of([0.0, 1.0, 1.0, -2.5])
    assert histogram is not None
    buckets = dict(zip(histogram.bucket_limit, histogram.bucket, strict=True))
    assert buckets[1e-12] == 1  # 0.0 is in [0, 1e-12)
    assert sum(c for limit, c in buckets.items() if 1.0 < limit < 1.1) == 2
    assert sum(histogram.bucket) == histogram.num == 4
    # runs of empty buckets collapse into one: a handful of numbers, not 1,551
    assert len(histogram.bucket) < 12


def test_the_bucket_of_each_value_is_exactly_the_binary_searchs() -> None:
    """The logarithm that places values must agree with a search of the real edges, on every
    edge, just either side of it, and across the whole range."""
    from trainops.tensorboard._histogram import _bucket_index

    limits = np.asarray(DEFAULT_BUCKET_LIMITS)
    inner = limits[1:-1]
    rng = np.random.default_rng(0)
    spread = np.exp(rng.uniform(-60.0, 60.0, 50_000)) * rng.choice([-1.0, 1.0], 50_000)
    tiny = [0.0, -0.0, 5e-324, -5e-324, 1e-12, -1e-12, 1e300, -1e300, limits[0], limits[-1]]
    values = np.concatenate(
        [inner, np.nextafter(inner, np.inf), np.nextafter(inner, -np.inf), spread, tiny]
    )
    expected = np.searchsorted(limits, values, side="right")
    assert (_bucket_index(values, limits) == expected).all()


def test_values_that_are_not_finite_are_left_out(tmp_path: Path) -> None:
    histogram = histogram_of([1.0, math.nan, math.inf, -math.inf, 3.0])
    assert histogram is not None
    assert (histogram.num, histogram.min, histogram.max, histogram.sum) == (2, 1.0, 3.0, 4.0)
    with SummaryWriter(tmp_path) as writer:
        assert writer.add_histogram("nan", [math.nan, math.inf], 1) is False
        assert writer.add_histogram("empty", np.zeros((0, 3)), 1) is False
        assert writer.add_histogram("ok", [1.0], 1) is True
    assert _accumulator(tmp_path).Tags()["histograms"] == ["ok"]


@pytest.mark.parametrize("bad", [["a", "b"], [{"x": 1}], np.array([1 + 2j])])
def test_values_that_are_not_numbers_are_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="a histogram needs numbers"):
        histogram_of(bad)


def _write_histograms(logdir: Path) -> list[np.ndarray]:
    arrays = [RNG.normal(loc=step, size=500) for step in range(3)]
    with SummaryWriter(logdir) as writer:
        for step, array in enumerate(arrays):
            assert writer.add_histogram("weights/fc1", array, step)
    return arrays


def test_tensorboard_shows_histograms_and_distributions(tmp_path: Path) -> None:
    arrays = _write_histograms(tmp_path)
    accumulator = _accumulator(tmp_path)
    assert accumulator.Tags()["distributions"] == ["weights/fc1"]
    events = accumulator.Histograms("weights/fc1")
    assert [e.step for e in events] == [0, 1, 2]
    for event, array in zip(events, arrays, strict=True):
        assert event.histogram_value.num == 500
        assert event.histogram_value.min == pytest.approx(array.min())
        assert event.histogram_value.sum == pytest.approx(array.sum())
    compressed = accumulator.CompressedHistograms("weights/fc1")
    medians = [dict(c.compressed_histogram_values)[5000] for c in compressed]  # basis points
    assert medians == sorted(medians) and medians[2] - medians[0] == pytest.approx(2, abs=0.3)


# tbparse 0.0.9 calls pandas' sort_values(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_tbparse_reads_histograms_and_hparams(tmp_path: Path) -> None:
    tbparse = require_extra("dev", "tbparse")
    _write_histograms(tmp_path)
    with SummaryWriter(tmp_path) as writer:
        writer.add_session_start({"lr": "0.01", "optimizer": "sgd"}, "job-1", 10.0)
    reader = tbparse.SummaryReader(str(tmp_path))
    frame = reader.histograms
    assert list(frame["step"]) == [0, 1, 2]
    assert [int(sum(counts)) for counts in frame["counts"]] == [500, 500, 500]
    hparams = dict(zip(reader.hparams["tag"], reader.hparams["value"], strict=True))
    assert hparams == {"lr": 0.01, "optimizer": "sgd"}


def test_tensorflows_reader_reads_the_histograms(tmp_path: Path) -> None:
    tf = require_extra("tensorflow")
    arrays = _write_histograms(tmp_path)
    (path,) = tmp_path.iterdir()
    events = list(tf.compat.v1.train.summary_iterator(str(path)))
    assert events[0].file_version == "brain.Event:2"
    histos = [e.summary.value[0].histo for e in events[1:]]
    assert [h.num for h in histos] == [500] * 3
    assert [h.max for h in histos] == [a.max() for a in arrays]


def _plugin_data(accumulator: event_accumulator.EventAccumulator, tag: str) -> Any:
    content = accumulator.SummaryMetadata(tag).plugin_data.content
    return plugin_data_pb2.HParamsPluginData.FromString(content)


def test_an_hparams_session_is_what_the_hparams_plugin_reads(tmp_path: Path) -> None:
    hparams = {"lr": "0.1", "epochs": "3", "deep": "True", "name": "x\x1b[2J", "": "", "inf": "inf"}
    with SummaryWriter(tmp_path) as writer:
        writer.add_session_start(hparams, "job-7", 100.0)
        writer.add_scalar("train:loss", 0.5, 1)
        writer.add_session_end(SessionStatus.FAILURE, 200.0)
    accumulator = _accumulator(tmp_path)
    assert accumulator.SummaryMetadata(SESSION_START_TAG).plugin_data.plugin_name == "hparams"
    start = _plugin_data(accumulator, SESSION_START_TAG).session_start_info
    assert start.group_name == "job-7" and start.start_time_secs == 100.0
    shown = {name: value.WhichOneof("kind") for name, value in start.hparams.items()}
    assert shown == {
        "lr": "number_value",
        "epochs": "number_value",
        "deep": "bool_value",
        "name": "string_value",
        "": "string_value",
        "inf": "string_value",  # not finite: kept as the text
    }
    assert start.hparams["name"].string_value == "x\x1b[2J"  # data, shown by TensorBoard as text
    end = _plugin_data(accumulator, SESSION_END_TAG).session_end_info
    assert (end.status, end.end_time_secs) == (SessionStatus.FAILURE, 200.0)


def test_session_events_equal_the_hparams_plugins_own() -> None:
    ours = event_pb2.Event.FromString(session_start_event({"a": 1.5, "b": "x"}, "g", 5.0))
    theirs = summary_v2.hparams_pb({"a": 1.5, "b": "x"}, trial_id="g", start_time_secs=5.0)
    # the map's entries are serialized in no set order: compare the parsed content
    (ours_value,), (their_value,) = ours.summary.value, theirs.value
    for value in (ours_value, their_value):
        content = value.metadata.plugin_data.content
        value.metadata.plugin_data.content = b""
        value.tensor.string_val.append(_parsed(content).SerializeToString(deterministic=True))
    assert ours_value == their_value
    ended = event_pb2.Event.FromString(session_end_event(SessionStatus.SUCCESS, 6.0))
    info = plugin_data_pb2.SessionEndInfo(status=SessionStatus.SUCCESS, end_time_secs=6.0)
    data = plugin_data_pb2.HParamsPluginData(session_end_info=info)
    # the v1 summary.session_end_pb, with the v2 writer's empty tensor (as hparams_pb has)
    assert ended.summary == summary_v2._summary_pb(SESSION_END_TAG, data)


def _parsed(content: bytes) -> Any:
    return plugin_data_pb2.HParamsPluginData.FromString(content)


def test_step_summaries_keep_smdebugs_layout(tmp_path: Path) -> None:
    summaries = StepSummaries(tmp_path, worker="123_algo/1")
    for step in (0, 5):
        summaries.add_scalar("TRAIN", step, "loss", 1.0 / (step + 1))
        assert summaries.add_histogram("TRAIN", step, "weights/fc.weight", RNG.normal(size=9))
        summaries.end_step()
    summaries.add_scalar("EVAL", 5, "loss", 0.7)
    summaries.close()
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "EVAL/000000000005_123_algo_1.tfevents",
        "TRAIN/000000000000_123_algo_1.tfevents",
        "TRAIN/000000000005_123_algo_1.tfevents",
    ]
    train = _accumulator(tmp_path / "TRAIN")
    assert [e.step for e in train.Histograms("weights/fc.weight")] == [0, 5]
    assert [e.step for e in train.Scalars("loss")] == [0, 5]
    with pytest.raises(ValueError, match="unknown mode 'TRAINING'"):
        summaries.add_scalar("TRAINING", 6, "loss", 0.1)


@pytest.mark.parametrize("name", ["../x.tfevents", "no-mark", "a/b.tfevents"])
def test_a_file_name_without_the_mark_or_with_a_slash_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="an event file's name"):
        SummaryWriter(tmp_path, file_name=name)
