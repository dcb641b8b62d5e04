"""The per-process step recorder: turns events (a batch fetched, the outermost forward, the
optimizer's step, an explicit ``step()``) into one row per step of the steps series.

A step opens at its first event and its phases add up while it is open:

- ``data``: time inside the DataLoader iterator's ``__next__``;
- ``forward``: time inside the outermost module's forward;
- ``backward``: from the end of a training-mode forward to the next event (in the common loop,
  the optimizer's step: the backward pass, gradient clipping, anything in between);
- ``optimizer``: time inside ``optimizer.step()``.

Without explicit steps, a train step ends when an optimizer's step returns (a second optimizer
stepping right after, as in a GAN, belongs to the same step: the row is written at the next
event that is not an optimizer's), and a forward in eval mode (``module.training`` False) with
no training forward before it in the step is an eval step of its own. With explicit steps
(:meth:`Recorder.begin` / :meth:`Recorder.end`) only they set the boundaries; the hooks still
time the phases. Train steps are numbered from 0, eval steps from 0 on their own; profiling
windows follow the train step number.

One recorder per process, made on the first event: never in a DataLoader worker nor in a forked
child (they would write the parent's rows again).
"""

from __future__ import annotations

import atexit
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from trainops.profiler._files import say
from trainops.profiler._layout import chunk_prefix, dataloader_dir, steps_dir
from trainops.profiler._names import DATALOADER_COLUMNS, MODE_EVAL, MODE_TRAIN, STEP_COLUMNS
from trainops.profiler._series import SeriesWriter
from trainops.profiler._settings import RecorderSettings, rank_from_env, read_settings
from trainops.profiler._windows import DataloaderWindow, WindowRunner, make_runner

__all__ = ["Recorder", "current", "reset_for_tests"]

_NAN = math.nan
DATA, FORWARD, BACKWARD, OPTIMIZER = 0, 1, 2, 3
PHASES = {"data": DATA, "forward": FORWARD, "backward": BACKWARD, "optimizer": OPTIMIZER}


class Recorder:
    """Step rows of one process (see the module docstring for what a step is)."""

    def __init__(self, settings: RecorderSettings, root: Path, rank: int) -> None:
        self.settings, self.rank, self.pid = settings, rank, os.getpid()
        self.job_start = settings.job_start
        header = {"kind": "steps", "host": settings.host, "rank": rank}
        header["attempt"] = settings.attempt
        self.writer = SeriesWriter(
            root / steps_dir(settings.host, rank),
            header,
            STEP_COLUMNS,
            prefix=chunk_prefix(settings.attempt),
        )
        self.windows: list[WindowRunner] = [
            make_runner(w, root, settings.host, rank, settings.attempt) for w in settings.windows
        ]
        self.root = root
        self.iterators: SeriesWriter | None = None  # iterator starts outside a dataloader window
        self.dataloader: DataloaderWindow | None = None
        for runner in self.windows:
            if isinstance(runner, DataloaderWindow):
                self.dataloader = runner
        self.enabled = True
        self.explicit = False
        self.counts = [0, 0]  # train, eval steps so far
        self._clear()
        self.pending_end: float | None = None
        self.last_train_forward_end: float | None = None
        self.forward_start = 0.0
        self.optimizer_start = 0.0

    def _clear(self) -> None:
        self.open = False
        self.in_explicit = False
        self.start_pc = 0.0
        self.start_wall = 0.0
        self.phases = [_NAN, _NAN, _NAN, _NAN]
        self.samples = _NAN
        self.saw_train = False
        self.saw_eval = False
        self.explicit_mode: float | None = None

    # -- events -------------------------------------------------------------------------------

    def touch(self, now: float, optimizer: bool = False) -> None:
        """An event at ``now`` (perf_counter): settle a pending end, close the backward gap,
        open a step if none is."""
        if self.pending_end is not None:
            if optimizer:
                self.pending_end = None  # another optimizer of the same step
            else:
                end, self.pending_end = self.pending_end, None
                self.close(end, MODE_TRAIN)
        if self.last_train_forward_end is not None:
            self.add(BACKWARD, now - self.last_train_forward_end)
            self.last_train_forward_end = None
        if not self.open:
            self.open, self.start_pc, self.start_wall = True, now, time.time()
            if self.windows:
                self._windows_at_start(self.start_wall)

    def add(self, phase: int, seconds: float) -> None:
        value = self.phases[phase]
        self.phases[phase] = seconds if value != value else value + seconds

    def add_samples(self, count: float) -> None:
        self.samples = count if self.samples != self.samples else self.samples + count

    def forward_began(self, now: float) -> None:
        self.touch(now)
        self.forward_start = now

    def forward_ended(self, now: float, training: bool) -> None:
        self.add(FORWARD, now - self.forward_start)
        if training:
            self.saw_train = True
            self.last_train_forward_end = now
        elif not self.saw_train and not self.explicit:
            self.close(now, MODE_EVAL)
        else:
            self.saw_eval = True

    def optimizer_began(self, now: float) -> None:
        self.touch(now, optimizer=True)
        self.optimizer_start = now

    def optimizer_ended(self, now: float) -> None:
        self.add(OPTIMIZER, now - self.optimizer_start)
        self.saw_train = True
        if not self.explicit:
            self.pending_end = now

    def fetched(
        self, began: float, ended: float, samples: float, loader: tuple[float, ...]
    ) -> None:
        """A batch came out of a DataLoader iterator (``loader``: workers, batch index)."""
        self.touch(began)
        self.add(DATA, ended - began)
        if samples == samples:
            self.add_samples(samples)
        if self.dataloader is not None and self.dataloader.active:
            wall = self.start_wall + (began - self.start_pc)
            self.dataloader.row((wall, ended - began, *loader, float(self.counts[0])))

    def iterator_started(self, began: float, ended: float, workers: int) -> None:
        """A DataLoader iterator was made (its workers started): a dataloader row, batch NaN.

        Recorded whether or not a dataloader window is open (one row per epoch and loader costs
        nothing), so the Dataloader rule always knows how many workers feed each rank."""
        wall = time.time() - (time.perf_counter() - began)
        row = (wall, ended - began, float(workers), _NAN, float(self.counts[0]))
        if self.dataloader is not None and self.dataloader.active:
            self.dataloader.row(row)
            return
        if self.iterators is None:
            header = {"kind": "dataloader", "host": self.settings.host, "rank": self.rank}
            header["attempt"] = self.settings.attempt
            self.iterators = SeriesWriter(
                self.root / dataloader_dir(self.settings.host, self.rank),
                header,
                DATALOADER_COLUMNS,
                prefix=f"{chunk_prefix(self.settings.attempt)}iterators-",
            )
        self.iterators.append(row)

    # -- explicit steps -----------------------------------------------------------------------

    def begin(self, mode: float | None = None) -> None:
        now = time.perf_counter()
        if not self.explicit:
            self.explicit = True
            if self.pending_end is not None:
                end, self.pending_end = self.pending_end, None
                self.close(end, MODE_TRAIN)
        if self.in_explicit:
            self.close(now, self._mode())
        keep = self.open and math.isnan(self.phases[FORWARD]) and math.isnan(self.phases[OPTIMIZER])
        if self.open and not keep:
            self._clear()  # an auto step cut short by the first explicit one: dropped
            self.last_train_forward_end = None
        self.touch(now)
        self.in_explicit, self.explicit_mode = True, mode

    def end(self, samples: float | None = None) -> None:
        now = time.perf_counter()
        if not self.open:
            return
        if self.last_train_forward_end is not None:
            self.add(BACKWARD, now - self.last_train_forward_end)
            self.last_train_forward_end = None
        if samples is not None:
            self.samples = float(samples)
        self.close(now, self._mode())

    def _mode(self) -> float:
        if self.explicit_mode is not None:
            return self.explicit_mode
        return MODE_EVAL if self.saw_eval and not self.saw_train else MODE_TRAIN

    # -- rows and windows ---------------------------------------------------------------------

    def close(self, end: float, mode: float) -> None:
        """Write the open step's row (ending at ``end``, perf_counter) and start afresh."""
        if not self.open:
            return
        kind = 1 if mode == MODE_EVAL else 0
        number = self.counts[kind]
        self.counts[kind] = number + 1
        data, forward, backward, optimizer = self.phases
        row = (self.start_wall, float(number), mode, end - self.start_pc)
        self.writer.append((*row, data, forward, backward, optimizer, self.samples))
        self._clear()
        self.last_train_forward_end = None
        if self.windows and kind == 0:
            self._windows_at_end(number, self.start_wall + (end - self.start_pc))

    def _windows_at_start(self, wall: float) -> None:
        step = self.counts[0]
        for runner in self.windows:
            if runner.active:
                runner.step(step)
            elif not runner.done and runner.window.covers(step, wall, self.job_start):
                runner.open(step)

    def _windows_at_end(self, step: int, wall: float) -> None:
        for runner in self.windows:
            if runner.active and runner.window.ended(step + 1, wall, self.job_start):
                runner.close(step)

    def finish(self) -> None:
        """At exit: the pending step's row, open windows closed, the last chunk written."""
        if not self.enabled or os.getpid() != self.pid:
            return
        self.enabled = False
        if self.pending_end is not None:
            end, self.pending_end = self.pending_end, None
            self.close(end, MODE_TRAIN)
        for runner in self.windows:
            runner.close(max(self.counts[0] - 1, runner.first_step))
        try:
            self.writer.close()
            if self.iterators is not None:
                self.iterators.close()
        except OSError as exc:
            say(f"cannot write the last step rows: {exc}")


_lock = threading.Lock()
_state: dict[str, Any] = {"recorder": None, "decided": False}


def current() -> Recorder | None:
    """This process's recorder, made on first use; None when recording is off here."""
    recorder: Recorder | None = _state["recorder"]
    if recorder is not None or _state["decided"]:
        return recorder
    with _lock:
        if not _state["decided"]:
            _state["recorder"] = _make()
            _state["decided"] = True
    made: Recorder | None = _state["recorder"]
    return made


def _make() -> Recorder | None:
    settings = read_settings()
    for problem in settings.problems:
        say(problem)
    if settings.directory is None or _in_worker():
        return None
    recorder = Recorder(settings, settings.directory, _rank())
    atexit.register(recorder.finish)
    os.register_at_fork(after_in_child=_forked)
    _chain_sigterm(recorder.finish)
    return recorder


def _in_worker() -> bool:
    """A DataLoader worker (spawned or forked): its rows would be the parent's."""
    import sys

    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", None)
    return bool(info is not None and info() is not None)


def _rank() -> int:
    import sys

    rank = rank_from_env(os.environ)
    if rank is not None:
        return rank
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a half-made process group: rank 0 is as good a guess as any
        return 0
    return 0


def _forked() -> None:
    recorder: Recorder | None = _state["recorder"]
    if recorder is not None:
        recorder.enabled = False
    _state["recorder"], _state["decided"] = None, True


def _chain_sigterm(finish: Callable[[], None]) -> None:
    """On SIGTERM (a stop), write the last rows, then die of SIGTERM as before; only where the
    script has no handler of its own and this is the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        del frame
        try:
            finish()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def reset_for_tests() -> None:
    """Forget this process's recorder (tests that change the environment in-process)."""
    _state["recorder"], _state["decided"] = None, False
