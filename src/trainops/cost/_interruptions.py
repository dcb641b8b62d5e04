"""What each interruption of a spot job cost: the work lost and the time to get going again.

Read from the job's status transitions and its checkpoint records (seam 5: one record per sync
or restore of a host's ``/opt/ml/checkpoints``):

- an interruption starts at its ``Interrupted`` transition; the attempt it ended had been
  training since its ``Training`` transition (one interrupted before it trained lost nothing);
- the work it lost is the time from the newest state saved for good to the interruption: the
  newest write of the last checkpoint synced by then (``synced`` records only; a sync that
  failed or stopped half-way saved nothing), the newest of each host taken and the oldest
  across the hosts that sync (the job resumes from a state every host has), and never earlier
  than the attempt's ``Training`` start (what the attempt restored was saved before it). A
  checkpoint synced in the notice window counts: that is what the notice is for;
- its restart overhead is the time from ``Interrupted`` to ``Training`` again (the notice, the
  wait for capacity, starting the hosts and restoring the checkpoint);
- the new attempt resumed from a checkpoint when a host restored one before the next
  interruption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["CheckpointLike", "Interruption", "TransitionLike", "billable_seconds",
           "interruptions"]  # fmt: skip

INTERRUPTED = "Interrupted"
TRAINING = "Training"
# Transitions during which an attempt's hosts are being told to stop: the attempt is billed
# until they are down (the transition's end).
_STOPPING_HOSTS = frozenset({INTERRUPTED, "Restarting"})


class TransitionLike(Protocol):
    """What is read of a status transition (``trainops.store.Transition`` fits)."""

    @property
    def status(self) -> str: ...
    @property
    def start_time(self) -> float: ...
    @property
    def end_time(self) -> float | None: ...
    @property
    def message(self) -> str: ...


class CheckpointLike(Protocol):
    """What is read of a checkpoint record (``trainops.store.CheckpointRecord`` fits)."""

    @property
    def host(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def at(self) -> float: ...
    @property
    def newest_write(self) -> float | None: ...
    @property
    def write_seconds(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Interruption:
    """One interruption: when, what it lost, and how long until training went on."""

    at: float
    message: str
    training_since: float | None  # None: the attempt had not trained yet (nothing lost)
    saved_at: float | None  # the newest state synced by then (None: nothing synced this attempt)
    lost_seconds: float
    restart_seconds: float | None  # None: not training again (yet)
    resumed_from_checkpoint: bool | None  # None: not training again (yet)

    def to_json(self) -> dict[str, object]:
        return {
            "At": _iso(self.at),
            "Message": self.message,
            "TrainingSince": _iso(self.training_since),
            "SavedAt": _iso(self.saved_at),
            "LostSeconds": round(self.lost_seconds, 3),
            "RestartSeconds": _rounded(self.restart_seconds),
            "ResumedFromCheckpoint": self.resumed_from_checkpoint,
        }


def interruptions(
    transitions: Sequence[TransitionLike],
    checkpoints: Sequence[CheckpointLike],
    now: float,
) -> list[Interruption]:
    """Every interruption of the job, oldest first, as of ``now``."""
    found = []
    for index, step in enumerate(transitions):
        if step.status != INTERRUPTED:
            continue
        since = _attempt_training_start(transitions[:index])
        down = step.end_time if step.end_time is not None else now
        saved = None if since is None else _saved_at(checkpoints, since, down)
        later = transitions[index + 1 :]
        again = _next_training_start(later)
        until = next((t.start_time for t in later if t.status == INTERRUPTED), math.inf)
        found.append(
            Interruption(
                at=step.start_time,
                message=step.message,
                training_since=since,
                saved_at=saved,
                lost_seconds=_lost(step.start_time, since, saved),
                restart_seconds=None if again is None else max(0.0, again - step.start_time),
                resumed_from_checkpoint=_restored(checkpoints, step.start_time, again, until),
            )
        )
    return found


def billable_seconds(transitions: Sequence[TransitionLike], end: float) -> float:
    """The seconds the hosts ran: each attempt from its ``Training`` start until its hosts were
    down (the end of the ``Interrupted``/``Restarting`` after it), the last one until ``end``."""
    total, since = 0.0, None
    for step in transitions:
        if step.status == TRAINING and since is None:
            since = step.start_time
        elif step.status in _STOPPING_HOSTS and since is not None:
            total += max(0.0, (step.end_time if step.end_time is not None else end) - since)
            since = None
    if since is not None:
        total += max(0.0, end - since)
    return total


def _attempt_training_start(before: Sequence[TransitionLike]) -> float | None:
    """When the interrupted attempt began training: its ``Training`` after the last stop of an
    earlier attempt (None: it was interrupted before it trained)."""
    for step in reversed(before):
        if step.status == TRAINING:
            return step.start_time
        if step.status in _STOPPING_HOSTS:
            return None
    return None


def _lost(at: float, since: float | None, saved: float | None) -> float:
    if since is None:
        return 0.0
    return max(0.0, at - max(since, saved if saved is not None else since))


def _next_training_start(transitions: Sequence[TransitionLike]) -> float | None:
    return next((t.start_time for t in transitions if t.status == TRAINING), None)


def _saved_at(checkpoints: Sequence[CheckpointLike], since: float, down: float) -> float | None:
    """The newest write every syncing host had synced between ``since`` and ``down``."""
    newest: dict[str, float] = {}
    for record in checkpoints:
        if record.kind != "synced" or record.newest_write is None:
            continue
        if since <= record.at <= down and record.newest_write >= since:
            newest[record.host] = max(newest.get(record.host, since), record.newest_write)
    return min(newest.values()) if newest else None


def _restored(
    checkpoints: Sequence[CheckpointLike], interrupted: float, again: float | None, until: float
) -> bool | None:
    """A host restored a checkpoint after the interruption and before the next one (a restore
    may be reported just before or just after the new attempt's ``Training``)."""
    if again is None:
        return None
    return any(r.kind == "restored" and interrupted <= r.at < until for r in checkpoints)


def _iso(ts: float | None) -> str | None:
    """A time as the API gives every time: ISO 8601, UTC, milliseconds."""
    return (
        None
        if ts is None
        else datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
