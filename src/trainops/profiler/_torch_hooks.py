"""Step timing of a PyTorch loop with no code change: global hooks installed when torch is imported.

- ``torch.optim``'s global optimizer step pre/post hooks: the optimizer phase, and the train
  step's end;
- global module forward pre/post hooks counting depth, so only the outermost module's forward
  is timed (its ``training`` flag tells train from eval; a forward that autograd re-runs during
  backward, as activation checkpointing does, is not a forward of the step). Once the
  outermost modules are known, the hooks move onto them alone (:class:`_Scope`);
- ``_BaseDataLoaderIter.__next__`` and ``DataLoader.__iter__`` wrapped: the data phase, the
  batch's size (first dimension of its first tensor), the dataloader window's rows.

Every hook first asks for this process's recorder (None in DataLoader workers and forked
children, where nothing is recorded; off once a hook has failed: never the script's error).
Hooks time only on the thread of the first forward or optimizer step (DataParallel's replica
threads run forwards too; a prefetching thread fetches batches). Under ``torch.compile``
tracing the hooks do nothing. :func:`install` is idempotent; :func:`uninstall` takes
everything back.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from trainops.profiler._files import say
from trainops.profiler._recorder import DATA, FORWARD, OPTIMIZER, Recorder, current

__all__ = ["batch_size", "install", "installed", "uninstall"]

#: Train steps with global forward hooks before they move onto the outermost modules.
DISCOVER_STEPS = 10
MAX_WIDENINGS = 3

_COMPILE_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"

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
    # torch warns that global hooks fire once more for torch.compile's wrapper module; the
    # depth count takes that wrapper as the outermost module, so the warning is not the user's.
    warnings.filterwarnings("ignore", message=_COMPILE_WARNING, category=UserWarning)
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


def _recorder(trains: bool = False) -> Recorder | None:
    """This process's recorder while it records; ``trains``: the caller is a forward or an
    optimizer step, whose thread (the first one's) is the one the hooks time from then on."""
    recorder = current()
    if recorder is None or not recorder.enabled:
        return None
    if trains and _depth.thread is None:
        _depth.thread = _ident()
    return recorder


def _broken(recorder: Recorder, error: Exception) -> None:
    """A hook failed: step timing stops in this process (the hooks turn into no-ops), one line
    says why, and the script goes on as if nothing had happened."""
    recorder.enabled = False
    say(f"step timing stopped in this process ({type(error).__name__}: {error})")


def _install_optimizer(torch: Any) -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def pre(optimizer: Any, args: Any, kwargs: Any) -> None:
        recorder = _recorder(trains=True)
        if recorder is not None:
            try:
                if _scope:
                    _scope[0].check(recorder, True)
                recorder.optimizer_began(_perf())
            except Exception as exc:
                _broken(recorder, exc)

    def post(optimizer: Any, args: Any, kwargs: Any) -> None:
        recorder = _recorder()
        if recorder is not None:
            try:
                recorder.optimizer_ended(_perf())
            except Exception as exc:
                _broken(recorder, exc)

    _undo.append(register_optimizer_step_pre_hook(pre).remove)
    _undo.append(register_optimizer_step_post_hook(post).remove)


class _Scope:
    """Where the forward hooks sit. Global hooks make every module call take torch's slow path
    (a few microseconds each), so they run only until the outermost modules are known: for
    :data:`DISCOVER_STEPS` train steps; then the hooks move onto those modules alone and their
    children run hook-free. A step that shows an unseen outermost module (an optimizer step, or
    a second batch, with no forward timed since the step began) puts the global hooks back for
    another discovery, at most :data:`MAX_WIDENINGS` times; after that they stay global."""

    def __init__(self, torch: Any, pre: Callable[..., None], post: Callable[..., None]) -> None:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self.pre, self.post = pre, post
        self._global = (register_module_forward_pre_hook, register_module_forward_hook)
        self.roots: weakref.WeakSet[Any] = weakref.WeakSet()
        self.handles: list[Any] = []
        self.narrowed = False
        self.narrow_at = DISCOVER_STEPS
        self.widenings = 0

    def spread(self) -> None:
        register_pre, register_post = self._global
        self.handles = [register_pre(self.pre), register_post(self.post, always_call=True)]

    def remove(self) -> None:
        while self.handles:
            self.handles.pop().remove()

    def narrow(self) -> None:
        roots = list(self.roots)
        if not roots:
            return
        self.remove()
        for root in roots:
            self.handles.append(root.register_forward_pre_hook(self.pre))
            self.handles.append(root.register_forward_hook(self.post, always_call=True))
        self.narrowed = True

    def widen(self, steps: int) -> None:
        self.remove()
        self.spread()
        self.narrowed = False
        self.widenings += 1
        self.narrow_at = steps + DISCOVER_STEPS if self.widenings < MAX_WIDENINGS else -1

    def check(self, recorder: Recorder, optimizer: bool) -> None:
        """At an optimizer step or a batch: narrow when it is time, widen when a root is unseen."""
        if not self.narrowed:
            if 0 <= self.narrow_at <= recorder.counts[0] and _depth.depth == 0:
                self.narrow()
            return
        if recorder.pending_end is not None:
            return  # a second optimizer of the same step
        phases = recorder.phases
        if phases[FORWARD] == phases[FORWARD]:
            return  # a forward was timed in this step
        fetched_twice = recorder.open and phases[DATA] == phases[DATA]
        if optimizer or (fetched_twice and phases[OPTIMIZER] != phases[OPTIMIZER]):
            self.widen(recorder.counts[0])


_scope: list[_Scope] = []


def _install_modules(torch: Any) -> None:
    compiling = torch.compiler.is_compiling
    in_backward = torch._C._current_graph_task_id
    tensor = torch.Tensor
    state = _depth

    def pre(module: Any, args: Any) -> None:
        if compiling() or (state.thread is not None and _ident() != state.thread):
            return
        if state.depth == 0:
            recorder = _recorder(trains=True)
            state.skip = recorder is None or in_backward() != -1
            if recorder is not None and not state.skip:
                try:
                    recorder.forward_began(_perf())
                    state.training = bool(module.training)
                    scope.roots.add(module)
                    first = args[0] if args else None
                    if recorder.samples != recorder.samples and isinstance(first, tensor):
                        shape = first.shape
                        if shape:
                            recorder.add_samples(float(shape[0]))
                except Exception as exc:
                    _broken(recorder, exc)
        state.depth += 1

    def post(module: Any, args: Any, output: Any) -> None:
        if compiling() or (state.thread is not None and _ident() != state.thread):
            return
        state.depth = max(0, state.depth - 1)
        if state.depth == 0 and not state.skip:
            recorder = _recorder()
            if recorder is not None:
                try:
                    recorder.forward_ended(_perf(), state.training)
                except Exception as exc:
                    _broken(recorder, exc)

    scope = _Scope(torch, pre, post)
    scope.spread()
    _scope.append(scope)

    def remove() -> None:
        scope.remove()
        _scope.clear()

    _undo.append(remove)


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
        try:
            if _scope:
                _scope[0].check(recorder, False)
        except Exception as exc:
            _broken(recorder, exc)
        began = _perf()
        batch = original_next(self)
        ended = _perf()
        try:
            where = (float(self._num_workers), float(self._num_yielded - 1))
            recorder.fetched(began, ended, batch_size(batch, tensor), where)
        except Exception as exc:
            _broken(recorder, exc)
        return batch

    def __iter__(self: Any) -> Any:
        recorder = _recorder()
        if recorder is None:
            return original_iter(self)
        began = _perf()
        iterator = original_iter(self)
        try:
            recorder.iterator_started(began, _perf(), int(self.num_workers))
        except Exception as exc:
            _broken(recorder, exc)
        return iterator

    setattr(iterator_class, "__next__", __next__)  # noqa: B010 (mypy: no method assignment)
    setattr(loader_class, "__iter__", __iter__)  # noqa: B010

    def restore() -> None:
        setattr(iterator_class, "__next__", original_next)  # noqa: B010
        setattr(loader_class, "__iter__", original_iter)  # noqa: B010

    _undo.append(restore)
