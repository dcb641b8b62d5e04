"""Reading event files back with TensorBoard's own reader, for the tests."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing import event_accumulator

Points = dict[str, list[tuple[int, float, float]]]


def scalars(logdir: Path | str) -> Points:
    """``tag -> [(step, value, wall_time), ...]`` of the event files directly in ``logdir``."""
    accumulator = event_accumulator.EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(e.step, e.value, e.wall_time) for e in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def values(points: Points, tag: str) -> list[float]:
    return [value for _step, value, _wall in points[tag]]
