"""Run by Python at start-up when trainops' bootstrap directory is on ``PYTHONPATH``.

It does five things, each unable to break the script:

1. Where ``TRAINOPS_PROFILER_DIR`` is set, or the job has a debugger hook config
   (``$SMDEBUG_CONFIG_FILE_PATH``, or ``debughookconfig.json`` in ``$SM_INPUT_CONFIG_DIR``), it
   adds an import hook that waits for ``torch``: once ``import torch`` has finished, it installs
   trainops' step-timing hooks (``trainops.profiler._torch_hooks``) and/or the debugger hook
   (``trainops.debugger.hook._auto``). A script that never imports torch never loads
   trainops. Any failure turns that part off with one line on stderr.
2. Where the job's interpreter has no ``trainops`` of its own (one the server's ``images``
   setting maps), a last meta-path finder makes the package this file is part of importable,
   by its path: only it, none of the server's other packages (the hooks and ``smdebug`` need
   it). Nothing is imported until something imports it.
3. It appends trainops' smdebug-compatible package (``trainops/debugger/_compat``) to the end
   of ``sys.path``, after site-packages, so ``import smdebug`` works and a real smdebug wins.
4. It runs the ``sitecustomize`` this one shadows, if any (the next one on ``sys.path``: a
   user's or the distribution's), as Python would have, under the name ``sitecustomize``.
5. Where ``TRAINOPS_YIELD_AT_EXIT`` is ``1`` (a process of a job of several; with neither of
   1.'s settings, it does only this and 4.), it registers the
   first exit handler, so the last to run: once torch is imported, it sleeps 10 ms before the
   interpreter ends. Gloo's work threads release the last collective's work after the script
   has its result, and that release takes the GIL; a thread taking the GIL while the
   interpreter finalizes is ended by ``pthread_exit``, whose unwinding through the work's
   ``noexcept`` destructor is ``std::terminate``: "terminate called without an active
   exception" and SIGABRT, a job that did all its work ending Failed (torch 2.13 on Python
   3.11: 7 runs in 20 of a two-rank DDP script under torchrun; with the pause, none in 30).

Only the standard library is imported here: this runs in every Python process the job starts.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import os
import sys
import time

# What every process of the job pays at start: not ``typing`` nor ``importlib.util`` (with
# ``contextlib``, ``re`` and more, about 10 ms), which only the branches that need them import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path, reporting its errors as ``site`` does."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin is None:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == _HERE:
        return
    from importlib.util import module_from_spec

    module = module_from_spec(spec)
    mine = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        if mine is not None:
            sys.modules["sitecustomize"] = mine
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                f"{type(exc).__name__}: {exc}\n"
            )


class _AfterTorch:
    """Torch's own loader, plus the hooks' installation once the module has run."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        made: ModuleType | None = self._loader.create_module(spec)
        return made

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        _install(module)


class _TorchWatcher:
    """A meta-path finder that answers only for ``torch``, once, wrapping its real loader."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        try:
            from importlib.util import find_spec

            spec = find_spec(name)
        except Exception:
            return None  # the regular machinery reports it again, as it would have
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterTorch(spec.loader)  # type: ignore[assignment]
        return spec


class _TrainopsFinder:
    """The last meta-path finder: ``trainops`` from this bootstrap's own package, for a job's
    interpreter that has none of its own (one the server's ``images`` setting maps, a user's
    environment). Only that package answers, found by its path: nothing else of the server's
    environment reaches the job's ``sys.path``, and an installed trainops is found first."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "trainops":
            return None
        package = os.path.dirname(os.path.dirname(_HERE))
        from importlib.util import spec_from_file_location

        return spec_from_file_location(
            name, os.path.join(package, "__init__.py"), submodule_search_locations=[package]
        )


def _install(torch: ModuleType) -> None:
    if _profiling():
        try:
            from trainops.profiler._torch_hooks import install

            install(torch)
        except Exception as exc:
            sys.stderr.write(
                "trainops.profiler: step timing is off in this process "
                f"({type(exc).__name__}: {exc})\n"
            )
    if _debugging():
        try:
            from trainops.debugger.hook._auto import install as install_debugger

            install_debugger(torch)
        except Exception as exc:
            sys.stderr.write(
                f"trainops.debugger: the hook is off in this process ({type(exc).__name__}: {exc})\n"
            )


def _profiling() -> bool:
    return bool(os.environ.get("TRAINOPS_PROFILER_DIR"))


def _debugging() -> bool:
    path = os.environ.get("SMDEBUG_CONFIG_FILE_PATH")
    if not path:
        folder = os.environ.get("SM_INPUT_CONFIG_DIR")
        if not folder:
            return False
        path = os.path.join(folder, "debughookconfig.json")
    return os.path.isfile(path)


def _offer_smdebug() -> None:
    compat = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "debugger", "_compat")
    if os.path.isdir(compat) and compat not in sys.path:
        sys.path.append(compat)


def _yield_to_collective_threads() -> None:
    """The last exit handler: a pause (the GIL released) for torch's collective threads."""
    if "torch" in sys.modules:
        time.sleep(0.01)


def _start() -> None:
    pausing = os.environ.get("TRAINOPS_YIELD_AT_EXIT") == "1"
    if pausing:
        atexit.register(_yield_to_collective_threads)  # first registered: run last
    observed = _profiling() or _debugging()
    if observed and "torch" not in sys.modules:
        sys.meta_path.insert(0, _TorchWatcher())  # first: the chained one may import torch
    if observed or not pausing:  # a job only paused at exit sees no more of trainops (1-3)
        sys.meta_path.append(_TrainopsFinder())  # last: an installed trainops wins
        _offer_smdebug()
    _chain()


_start()
