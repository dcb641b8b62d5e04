"""The debugger hook with no code change: installed when the script imports torch.

trainops' ``sitecustomize`` calls :func:`install` once ``import torch`` has finished, where the
job has a debugger hook config (``$SMDEBUG_CONFIG_FILE_PATH`` or the host tree's
``input/config/debughookconfig.json``). It makes a :class:`Hook` from that file and adds
global module hooks that find the script's models and losses as they are first called:

- a module called outside any registered model's forward is the script's model (registered
  with :meth:`Hook.register_module`; each later call is a step) unless it is a loss module
  (a ``torch.nn.modules.loss._Loss``), registered with :meth:`Hook.register_loss`;
- the model's ``training`` flag says TRAIN or EVAL, unless the script sets the mode itself.

A script that makes its own hook (smdebug style) takes over: the automatic one then stands
down. The global hooks do nothing while torch.compile traces. Any failure turns the hook off
with one line on stderr.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from trainops.debugger.hook._hook import Hook, get_hook
from trainops.debugger.hook._paths import config_file

__all__ = ["AutoHook", "config_present", "install"]

_installed: list[AutoHook] = []


def config_present() -> bool:
    return os.path.isfile(config_file())


class AutoHook:
    """The global hooks, and the hook they feed."""

    def __init__(self, torch: Any, hook: Hook) -> None:
        from torch.nn.modules.loss import _Loss

        self.hook, self._loss_type = hook, _Loss
        self._compiling = torch.compiler.is_compiling
        self._known: weakref.WeakSet[Any] = weakref.WeakSet()
        self._active: Any = None
        self._handles: list[Any] = []
        hook.mode_from_model = True

    def install(self, torch: Any) -> None:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
        ]

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def _pre(self, module: Any, args: Any) -> None:
        if self._compiling() or self._active is not None:
            return
        try:
            self._outermost(module, args)
        except Exception as exc:
            self.hook._broken(exc)
            self.remove()

    def _outermost(self, module: Any, args: Any) -> None:
        if get_hook() is not self.hook or not self.hook.enabled:
            self.remove()  # the script made its own hook
            self.hook.close()
            return
        if module in self._known:
            if not isinstance(module, self._loss_type):
                self._active = module
            return
        self._known.add(module)
        if isinstance(module, self._loss_type):
            self.hook.register_loss(module)
            return
        self.hook.register_module(module)
        self._active = module
        self.hook._root_pre(module, args)  # its own pre-hook starts with the next call

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self._compiling() and module is self._active:
            self._active = None


def install(torch: Any) -> None:
    """Make the hook from the job's config and add the global hooks (idempotent)."""
    if _installed or not config_present():
        return
    auto = AutoHook(torch, Hook.create_from_json_file())
    auto.install(torch)
    _installed.append(auto)
