"""The PyTorch hook: smdebug's ``smdebug.pytorch.Hook``, on PyTorch 2.x.

A step is one forward of a registered model (its outermost module), counted globally and per
mode (:mod:`._steps`). At a step that some collection saves (:mod:`._plan`), the hook takes the
model's parameters as the step begins, module inputs and outputs as they are computed, the
registered loss's output, and each parameter's gradient once autograd has accumulated it (a
hook on the parameter for that step only); reductions are computed on the tensor's device
and everything moves to the host once when the step ends (:mod:`._capture`), then is written
by a background thread (:mod:`._writer`). Steps that save nothing cost one forward pre-hook
on the model and nothing else, and only modules some collection asks for get a forward hook.

torch.compile: register the compiled model (``hook.register_module(torch.compile(model))``):
its step hook runs on the wrapper, outside the graph; the hooks inside are written so that
Dynamo traces them to nothing (no graph break), and what the graph hides (the inputs and
outputs of modules inside it) is named in one line on stderr, never silently missing. A model
registered and then compiled hides its forward from the hook: the hook then counts steps at
optimizer steps (global optimizer hooks) and says so in one line; parameters, gradients and
losses are saved either way.

TensorBoard (``export_tensorboard``/``tensorboard_dir``, or the job's ``TensorBoardOutputConfig``):
each saved step's histograms (collections with ``save_histogram``) and scalars (losses,
reductions, ``save_scalar``) are written by the writer's thread in smdebug's layout, a run per
mode (:mod:`._writer`).

A failure inside a hook turns the hook off with one line on stderr; the script goes on.
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import numpy as np

from trainops.debugger.config import (
    Collection,
    CollectionKeys,
    ReductionConfig,
    SaveConfig,
    load_hook_config,
)
from trainops.debugger.hook._capture import StepBuffer
from trainops.debugger.hook._models import Model, unwrap
from trainops.debugger.hook._names import (
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    SCALAR_PREFIX,
    io_name,
    pytorch_collections,
)
from trainops.debugger.hook._paths import (
    config_file,
    job_tensorboard_dir,
    out_dir_for,
    tensorboard_dir_for,
)
from trainops.debugger.hook._plan import SavePlan
from trainops.debugger.hook._steps import StepCounter
from trainops.debugger.hook._writer import StepOutput
from trainops.debugger.modes import ModeKeys, parse_mode

__all__ = ["Hook", "get_hook"]

_current: list[Hook] = []


def get_hook() -> Hook | None:
    """The hook made last in this process (by the script, or by trainops with no code change)."""
    return _current[-1] if _current else None


def _save_config(value: SaveConfig | Sequence[int] | None) -> SaveConfig:
    if value is None:
        return SaveConfig()
    if isinstance(value, SaveConfig):
        return value
    if isinstance(value, list | tuple):
        return SaveConfig(save_steps=list(value))
    raise TypeError(
        f"save_config must be a SaveConfig or a list of steps, not {type(value).__name__}"
    )


class Hook:
    """Saves a PyTorch model's tensors by collection (see the module docstring)."""

    def __init__(
        self,
        out_dir: str | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | Sequence[int] | None = None,
        include_regex: Sequence[str] | str | None = None,
        include_collections: Iterable[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
    ) -> None:
        import torch

        if include_workers not in ("one", "all"):
            raise ValueError(f"include_workers must be 'one' or 'all', not {include_workers!r}")
        self._torch = torch
        self.out_dir = out_dir_for(out_dir)
        self.export_tensorboard = bool(export_tensorboard)
        self.tensorboard_dir = tensorboard_dir_for(
            self.export_tensorboard, tensorboard_dir, self.out_dir
        )
        self.dry_run, self.include_workers = bool(dry_run), include_workers
        self.save_config = _save_config(save_config)
        self.reduction_config = reduction_config or ReductionConfig(save_raw_tensor=True)
        self.collection_manager = pytorch_collections()
        self.include_collections = self._included(include_collections, include_regex, save_all)
        self._output = StepOutput(
            torch,
            self.out_dir,
            self.dry_run,
            include_workers,
            self.collection_manager,
            self.tensorboard_dir,
        )
        self.enabled = True
        self.mode_from_model = False  # set by the no-code-change install: train/eval by flag
        self._steps = StepCounter()
        self._mode_set = False
        self._plan: SavePlan | None = None
        self._saving: frozenset[Collection] = frozenset()
        self._open: tuple[int, ModeKeys, int] | None = None
        self._buffer = StepBuffer(torch, summaries=self.tensorboard_dir is not None)
        self._models: list[Model] = []
        self._names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._io_index: dict[str, int] = {}
        self._grad_handles: list[Any] = []
        self._closed = False
        self._compiling: Callable[[], bool] = torch.compiler.is_compiling
        self._pid = os.getpid()  # a forked child (a DataLoader worker) saves nothing
        self._by_optimizer = False
        self._optimizers: weakref.WeakKeyDictionary[Any, tuple[bool, int]] = (
            weakref.WeakKeyDictionary()
        )
        self._optimizer_handles = self._watch_optimizers()
        _current.append(self)
        atexit.register(self.close)

    def _included(
        self, names: Iterable[str] | None, regex: Sequence[str] | str | None, save_all: bool
    ) -> list[str]:
        include = [names] if isinstance(names, str) else list(names or ())
        include.append(CollectionKeys.LOSSES)
        if regex:
            self.collection_manager.get(CollectionKeys.DEFAULT).include(regex)
            include.append(CollectionKeys.DEFAULT)
        if save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            include.append(CollectionKeys.ALL)
        for name in include:
            self.collection_manager.get(name)
        return list(dict.fromkeys(include))

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> Hook:
        """A hook as ``debughookconfig.json`` says (``json_file_path``, else
        ``$SMDEBUG_CONFIG_FILE_PATH``, else SageMaker's ``/opt/ml/input/config/``)."""
        config = load_hook_config(json_file_path or config_file())
        tensorboard_dir, export = config.tensorboard_dir(), config.export_tensorboard()
        if tensorboard_dir is None and export is not False:
            tensorboard_dir = job_tensorboard_dir()  # SageMaker's way: the job's TensorBoard
        hook = cls(
            out_dir=config.local_path,
            export_tensorboard=bool(export) or tensorboard_dir is not None,
            tensorboard_dir=tensorboard_dir if export is not False else None,
            dry_run=config.dry_run(),
            reduction_config=config.reduction_config(),
            save_config=config.save_config(),
            include_regex=config.include_regex() or None,
            include_collections=config.include_collections() or None,
            save_all=config.save_all(),
            include_workers=config.include_workers(),
        )
        for configured in config.collections():
            _merge(hook.collection_manager.get(configured.name), configured)
        return hook

    # -- what the script calls ------------------------------------------------------------

    @property
    def step(self) -> int:
        return self._steps.step

    @property
    def mode(self) -> ModeKeys:
        return self._steps.mode

    @property
    def mode_steps(self) -> dict[ModeKeys, int]:
        return dict(self._steps.mode_steps)

    def register_module(self, module: Any) -> None:
        """Save ``module``'s parameters, gradients and (as collections ask) its modules'
        inputs and outputs; each forward of ``module`` is a step."""
        if not isinstance(module, self._torch.nn.Module):
            raise TypeError(f"register_module takes a torch.nn.Module, not {type(module).__name__}")
        outer, inner, compiled = module, *unwrap(module)
        if inner in self._names:
            raise ValueError(f"{type(inner).__name__} is registered with this hook already")
        model = Model(outer, inner, compiled)
        for name, sub in model.modules():
            self._names[sub] = name
        self._names[outer] = model.class_name
        self._models.append(model)
        outer.register_forward_pre_hook(self._root_pre)
        if self._plan is not None:
            self._attach(model)

    def register_hook(self, module: Any) -> None:
        """smdebug's older name of :meth:`register_module`."""
        self.register_module(module)

    def register_loss(self, loss_module: Any) -> None:
        """Save the loss module's output (collection ``losses``) at every saved step."""
        if not isinstance(loss_module, self._torch.nn.Module):
            raise TypeError(
                f"register_loss takes a torch.nn.Module, not {type(loss_module).__name__}"
            )
        self._names[loss_module] = type(loss_module).__name__
        loss_module.register_forward_hook(self._module_io)

    def set_mode(self, mode: ModeKeys | int | str) -> None:
        """TRAIN, EVAL, PREDICT or GLOBAL: the steps from now on count in that mode."""
        self._steps.set_mode(parse_mode(mode))
        self._mode_set = True

    def save_scalar(
        self, name: str, value: Any, sm_metric: bool = False, timestamp: float | None = None
    ) -> None:
        """Save a scalar as ``scalar/<name>`` with the step in progress."""
        del sm_metric, timestamp  # the job's metrics come from its log; no separate stream
        array = self._host_array(value)
        if array.size != 1:
            raise TypeError(
                f"save_scalar({name!r}): the value must be a scalar, not shape {array.shape}"
            )
        self._buffer.add_host(SCALAR_PREFIX + str(name), array.reshape(()), scalar=True)

    def save_tensor(
        self,
        tensor_name: str,
        tensor_value: Any,
        collections_to_write: str | Iterable[str] = "default",
    ) -> None:
        """Save a tensor the script computed, in the given collection(s), with the step in progress."""
        names = (
            [collections_to_write]
            if isinstance(collections_to_write, str)
            else collections_to_write
        )
        for collection in names:
            self.collection_manager.get(collection).add_tensor_name(str(tensor_name))
        self._buffer.add_host(str(tensor_name), self._host_array(tensor_value))

    def get_collection(self, name: str, create: bool = True) -> Collection:
        return self.collection_manager.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        return self.collection_manager.get_collections()

    def add_collection(self, collection: Collection) -> None:
        if not isinstance(collection, Collection):
            raise TypeError(f"add_collection takes a Collection, not {type(collection).__name__}")
        self.collection_manager.add(collection)

    def close(self) -> None:
        """Write the step in progress and the collections; mark the end of training."""
        if self._closed or os.getpid() != self._pid:
            return
        self._closed = True
        while self._optimizer_handles:
            self._optimizer_handles.pop().remove()
        try:
            self._end_step()
            self._output.close()
        except Exception as exc:
            self._broken(exc)
        self.enabled = False

    # -- hooks on the model -----------------------------------------------------------------

    def _root_pre(self, module: Any, args: Any) -> None:
        if self._compiling() or not self.enabled or os.getpid() != self._pid:
            return
        try:
            self._begin_step(module)
        except Exception as exc:
            self._broken(exc)

    def _module_io(self, module: Any, inputs: Any, outputs: Any) -> None:
        if self._compiling() or not self._saving or not self.enabled:
            return
        try:
            name = self._names.get(module)
            if name is not None:
                self._save_io(name, INPUT_SUFFIX, inputs)
                self._save_io(name, OUTPUT_SUFFIX, outputs)
        except Exception as exc:
            self._broken(exc)

    def _watch_optimizers(self) -> list[Any]:
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        return [
            register_optimizer_step_pre_hook(lambda o, *_: self._optimizer_step(o, before=True)),
            register_optimizer_step_post_hook(lambda o, *_: self._optimizer_step(o, before=False)),
        ]

    def _optimizes_a_model(self, optimizer: Any) -> bool:
        """Whether ``optimizer`` updates a registered model's parameters (cached)."""
        found = self._optimizers.get(optimizer)
        if found is None or len(self._models) != found[1]:
            ours = {id(p) for model in self._models for _, _, p in model.parameters()}
            groups = getattr(optimizer, "param_groups", ())
            hit = any(id(p) in ours for group in groups for p in group.get("params", ()))
            found = self._optimizers[optimizer] = (hit, len(self._models))
        return found[0]

    def _optimizer_step(self, optimizer: Any, before: bool) -> None:
        """Steps counted at optimizer steps, where the registered model's own forwards are not
        seen: it was compiled after it was registered, so its hooks run inside the graph."""
        if not self._by_optimizer and (self._open is not None or not before):
            return  # the model's forwards count the steps (the common case: a few checks)
        if self._compiling() or not self.enabled or not self._models:
            return
        if os.getpid() != self._pid:
            return
        try:
            if not self._optimizes_a_model(optimizer):
                return
            if before and not self._by_optimizer and self._open is None:
                self._count_by_optimizer()
            if self._by_optimizer and before and self._saving:
                for model in self._models:
                    self._save_parameters(model, gradients_now=True)
            elif self._by_optimizer and not before:
                self._begin_step(None)
        except Exception as exc:
            self._broken(exc)

    def _count_by_optimizer(self) -> None:
        self._by_optimizer = True
        names = ", ".join(model.class_name for model in self._models)
        sys.stderr.write(
            f"trainops.debugger: {names} runs where the hook cannot see its forward (compiled "
            "after register_module): steps are counted at optimizer steps, the outputs of its "
            "modules are not saved; register the compiled module instead to save them\n"
        )
        self._begin_step(None)

    def _gradient(self, name: str, parameter: Any) -> None:
        if not self.enabled:
            return
        try:
            if parameter.grad is not None:
                self._save(name, parameter.grad)
        except Exception as exc:
            self._broken(exc)

    # -- steps ------------------------------------------------------------------------------

    def _begin_step(self, module: Any) -> None:
        """A step begins: at a forward of ``module`` (a registered model), or at an optimizer
        step (``module`` None, see :meth:`_optimizer_step`)."""
        self._end_step()
        if self.mode_from_model and not self._mode_set:
            training = module is None or module.training
            self._steps.set_mode(ModeKeys.TRAIN if training else ModeKeys.EVAL)
        if self._plan is None:
            self._prepare()
        self._steps.advance()
        self._io_index.clear()
        steps = self._steps
        self._open = (steps.step, steps.mode, steps.mode_step)
        assert self._plan is not None
        self._saving = self._plan.saving(steps.mode, steps.mode_step)
        if self._saving and module is not None:
            for model in self._models:
                self._save_parameters(model)

    def _prepare(self) -> None:
        self._plan = SavePlan(
            self.collection_manager,
            self.include_collections,
            self.save_config,
            self.reduction_config,
        )
        for model in self._models:
            self._attach(model)

    def _attach(self, model: Model) -> None:
        assert self._plan is not None
        model.add_type_collections(self.collection_manager)
        self._plan.forget()
        hidden = model.attach_io(self._plan, self._module_io)
        if hidden:
            shown = ", ".join(hidden[:5]) + (
                f" and {len(hidden) - 5} more" if len(hidden) > 5 else ""
            )
            sys.stderr.write(
                f"trainops.debugger: {model.class_name} is compiled (torch.compile): the inputs "
                f"and outputs of modules inside its graph are not saved ({shown}); its "
                "parameters, gradients, losses and its own inputs and outputs are\n"
            )

    def _save_parameters(self, model: Model, gradients_now: bool = False) -> None:
        for name, gradient, parameter in model.parameters():
            self._save(name, parameter)
            if gradients_now and parameter.grad is not None:
                self._save(gradient, parameter.grad)
            elif not gradients_now and parameter.requires_grad and self._wanted(gradient):
                hook = partial(self._gradient, gradient)
                self._grad_handles.append(parameter.register_post_accumulate_grad_hook(hook))

    def _wanted(self, name: str) -> frozenset[Collection]:
        assert self._plan is not None
        return self._saving.intersection(self._plan.of(name))

    def _save(self, name: str, tensor: Any) -> None:
        collections = self._wanted(name)
        if collections:
            self._buffer.add(name, tensor, collections)
            assert self._plan is not None
            self._plan.saved(name, collections)

    def _save_io(self, module: str, suffix: str, value: Any) -> None:
        key = module + suffix
        index = self._io_index.get(key, 0)
        for tensor in _tensors(value, self._torch.Tensor):
            self._save(io_name(module, suffix, index), tensor)
            index += 1
        self._io_index[key] = index

    def _end_step(self) -> None:
        while self._grad_handles:
            self._grad_handles.pop().remove()
        self._saving = frozenset()
        if not self._buffer or (self._open is None and not self._closed):
            return  # nothing, or a scalar saved before the first step: it joins that step
        step, mode, mode_step = self._open or (0, self._steps.mode, 0)
        tensors, summaries = self._buffer.drain()
        self._output.write_step(step, mode, mode_step, tensors, summaries)

    def _host_array(self, value: Any) -> np.ndarray:
        if isinstance(value, self._torch.Tensor):
            value = value.detach()
            if value.dtype == self._torch.bfloat16:
                value = value.float()
            return np.asarray(value.cpu().numpy())
        return np.asarray(value)

    def _broken(self, error: Exception) -> None:
        self.enabled = False
        while self._grad_handles:
            self._grad_handles.pop().remove()
        sys.stderr.write(
            f"trainops.debugger: the hook is off in this process ({type(error).__name__}: {error})\n"
        )


def _tensors(value: Any, tensor: type) -> Iterable[Any]:
    """The tensors in a module's inputs or outputs, in order (nested tuples and lists)."""
    if isinstance(value, tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item, tensor)


def _merge(into: Collection, configured: Collection) -> None:
    """A configured collection's settings over the hook's collection of that name."""
    into.save_config = configured.save_config
    if configured.reduction_config is not None:
        into.reduction_config = configured.reduction_config
    into.include(configured.include_regex)
    into.save_histogram = configured.save_histogram
