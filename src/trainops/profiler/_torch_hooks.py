"""Step timing of a PyTorch loop with no code change: global hooks installed when torch is imported.

- ``torch.optim``'s global optimizer step pre/post hooks: the optimizer phase, and the train
  step's end;
- global module forward pre/post hooks counting depth, so only the outermost module's forward
  is timed (its ``training`` flag tells train from eval; a forward that autograd re-runs during
  backward, as activation checkpointing does, is not a forward of the step);
- ``_BaseDataLoaderIter.__next__`` and ``DataLoader.__iter__`` wrapped: the data phase, the
  batch's size (first dimension of its first tensor), the dataloader window's rows.

Every hook first asks for this process's recorder (None in DataLoader workers and forked
children, where nothing is recorded), and times only on the thread of the recorder's first
event (DataParallel's replica threads run forwards too). Under ``torch.compile`` tracing the
hooks do nothing. :func:`install` is idempotent; :func:`uninstall` takes everything back.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from trainops.profiler._recorder import Recorder, current

__all__ = ["batch_size", "install", "installed", "uninstall"]

_perf = time.perf_counter
_ident = threading.get_ident
_undo: list[Callable[[], None]] = []


class _Depth:
    """Module-call nesting on the recording thread; ``skip``: the outermost call is not timed."""

    __slots__ = ("depth", "skip", "thread", "training")

    def __init__(self) -> None:
        self.depth = 0
        self.skip = False
        self.training = True
        self.thread: int | None = None


_depth = _Depth()


def installed() -> bool:
    return bool(_undo)


def install(torch: Any) -> None:
    """Register the hooks on ``torch`` (the imported module); a failure takes back what was done."""
    if _undo:
        return
    try:
        _install_optimizer(torch)
        _install_modules(torch)
        _install_dataloader(torch)
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    while _undo:
        _undo.pop()()


def _recorder() -> Recorder | None:
    recorder = current()
    if recorder is None or not recorder.enabled:
        return None
    if _depth.thread is None:
        _depth.thread = _ident()
    return recorder


def _install_optimizer(torch: Any) -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def pre(optimizer: Any, args: Any, kwargs: Any) -> None:
        recorder = _recorder()
        if recorder is not None:
            recorder.optimizer_began(_perf())

    def post(optimizer: Any, args: Any, kwargs: Any) -> None:
        recorder = _recorder()
        if recorder is not None:
            recorder.optimizer_ended(_perf())

    _undo.append(register_optimizer_step_pre_hook(pre).remove)
    _undo.append(register_optimizer_step_post_hook(post).remove)


def _install_modules(torch: Any) -> None:
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    compiling = torch.compiler.is_compiling
    in_backward = torch._C._current_graph_task_id
    tensor = torch.Tensor
    state = _depth

    def pre(module: Any, args: Any) -> None:
        if compiling() or (state.thread is not None and _ident() != state.thread):
            return
        if state.depth == 0:
            recorder = _recorder()
            state.skip = recorder is None or in_backward() != -1
            if recorder is not None and not state.skip:
                recorder.forward_began(_perf())
                state.training = bool(module.training)
                if recorder.samples != recorder.samples and args and isinstance(args[0], tensor):
                    shape = args[0].shape
                    if shape:
                        recorder.add_samples(float(shape[0]))
        state.depth += 1

    def post(module: Any, args: Any, output: Any) -> None:
        if compiling() or (state.thread is not None and _ident() != state.thread):
            return
        state.depth = max(0, state.depth - 1)
        if state.depth == 0 and not state.skip:
            recorder = _recorder()
            if recorder is not None:
                recorder.forward_ended(_perf(), state.training)

    _undo.append(register_module_forward_pre_hook(pre).remove)
    _undo.append(register_module_forward_hook(post, always_call=True).remove)


def batch_size(batch: Any, tensor: type) -> float:
    """The first dimension of the first tensor in ``batch`` (a tensor, or nested in the first
    element of a list/tuple or the first value of a dict); NaN when there is none."""
    for _ in range(4):
        if isinstance(batch, tensor):
            shape = batch.shape  # type: ignore[attr-defined]
            return float(shape[0]) if len(shape) else math.nan
        if isinstance(batch, list | tuple) and batch:
            batch = batch[0]
        elif isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        else:
            return math.nan
    return math.nan


def _install_dataloader(torch: Any) -> None:
    from torch.utils.data import dataloader

    iterator_class, loader_class = dataloader._BaseDataLoaderIter, dataloader.DataLoader
    original_next, original_iter = iterator_class.__next__, loader_class.__iter__
    tensor = torch.Tensor
    state = _depth

    def __next__(self: Any) -> Any:
        recorder = _recorder()
        if recorder is None or (state.thread is not None and _ident() != state.thread):
            return original_next(self)
        began = _perf()
        batch = original_next(self)
        ended = _perf()
        where = (float(self._num_workers), float(self._num_yielded - 1))
        recorder.fetched(began, ended, batch_size(batch, tensor), where)
        return batch

    def __iter__(self: Any) -> Any:
        recorder = _recorder()
        if recorder is None:
            return original_iter(self)
        began = _perf()
        iterator = original_iter(self)
        recorder.iterator_started(began, _perf(), int(self.num_workers))
        return iterator

    setattr(iterator_class, "__next__", __next__)  # noqa: B010 (mypy: no method assignment)
    setattr(loader_class, "__iter__", __iter__)  # noqa: B010

    def restore() -> None:
        setattr(iterator_class, "__next__", original_next)  # noqa: B010
        setattr(loader_class, "__iter__", original_iter)  # noqa: B010

    _undo.append(restore)
