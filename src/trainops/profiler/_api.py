"""The one-line API for loops the automatic hooks do not see: ``step()`` and ``phase()``.

::

    from trainops.profiler import step, phase

    for batch in batches:
        with step():                  # or step.begin() ... step.end()
            with phase("forward"):
                loss = model(batch)
            ...

``step(mode="eval")`` marks an evaluation step (default: train, or eval when only eval-mode
forwards ran in it); ``samples=`` gives the batch size where the DataLoader hook cannot tell
it. Once a script calls ``step``, only explicit steps set the boundaries; the PyTorch hooks
still time the phases within them, and a batch fetched just before ``step.begin()`` counts in
that step. Without ``TRAINOPS_PROFILER_DIR`` (by hand, on SageMaker) each call does nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from types import TracebackType

from trainops.profiler._files import say
from trainops.profiler._names import MODE_EVAL, MODE_TRAIN
from trainops.profiler._recorder import PHASES, Recorder, current

__all__ = ["phase", "step"]

_MODES = {"train": MODE_TRAIN, "eval": MODE_EVAL}


def _mode(mode: str | None) -> float | None:
    if mode is None:
        return None
    if mode not in _MODES:
        raise ValueError(f"step mode {mode!r}: use 'train' or 'eval'")
    return _MODES[mode]


def _safely(recorder: Recorder, call: Callable[[], None]) -> None:
    """Run a recorder call; a failure stops recording in this process, never the script."""
    try:
        call()
    except Exception as exc:
        recorder.enabled = False
        say(f"step timing stopped in this process ({type(exc).__name__}: {exc})")


class _StepContext:
    """The context manager ``step()`` returns: ``begin`` on entry, ``end`` on exit."""

    __slots__ = ("mode", "samples")

    def __init__(self, mode: float | None, samples: float | None) -> None:
        self.mode, self.samples = mode, samples

    def __enter__(self) -> None:
        recorder = current()
        if recorder is not None and recorder.enabled:
            _safely(recorder, lambda: recorder.begin(self.mode))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        recorder = current()
        if recorder is not None and recorder.enabled:
            _safely(recorder, lambda: recorder.end(self.samples))


class Step:
    """``step()`` (a context manager), ``step.begin()`` and ``step.end()``."""

    def __call__(self, mode: str | None = None, samples: int | None = None) -> _StepContext:
        return _StepContext(_mode(mode), None if samples is None else float(samples))

    def begin(self, mode: str | None = None) -> None:
        """A step begins now (ends the one still open, if any)."""
        recorder, chosen = current(), _mode(mode)
        if recorder is not None and recorder.enabled:
            _safely(recorder, lambda: recorder.begin(chosen))

    def end(self, samples: int | None = None) -> None:
        """The open step ends now; ``samples``: its batch size, if the hooks could not tell."""
        recorder, count = current(), None if samples is None else float(samples)
        if recorder is not None and recorder.enabled:
            _safely(recorder, lambda: recorder.end(count))


step = Step()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` (``data``, ``forward``, ``backward``, ``optimizer``) of
    the open step (added to what the hooks measured)."""
    index = PHASES.get(name)
    if index is None:
        raise ValueError(f"phase {name!r}: use one of {', '.join(PHASES)}")
    recorder = current()
    if recorder is None or not recorder.enabled:
        yield
        return
    began = time.perf_counter()
    _safely(recorder, lambda: recorder.touch(began))
    try:
        yield
    finally:
        if recorder.enabled:
            recorder.add(index, time.perf_counter() - began)
