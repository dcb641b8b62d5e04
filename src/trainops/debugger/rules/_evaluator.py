"""The process that runs one custom rule over one job's tensors, confined (``_sandbox``).

Started by the control plane (``trainops.rules._custom``) as ``python -I <this file>``, in an
empty scratch folder, with a minimal environment (no token, no credentials). It reads one JSON
line on stdin::

    {"source": <the rule's .py file>, "code": <the job's source folder>,
     "rule_to_invoke": <class name>, "parameters": {<name>: <string>...},
     "trial": <the job's local debug-output folder>, "memory_mb": <int>,
     "cpu_seconds": <int>, "poll_seconds": <float>}

then moves into a PID namespace of its own where the kernel allows one (a user namespace too
when not root): this process waits there as the namespace's parent and the rule runs as its pid
1, so whatever the rule starts (a child in a new session included) ends when the rule's process
does, however it ends. It confines itself (it may read only the Python installation, the job's
source folder and its tensors; it may write no file and open no TCP connection), imports the rule, and evaluates it
with a :class:`~trainops.debugger.rules.RuleRunner` every ``poll_seconds`` as steps arrive. It
writes a JSON line (``{"status", "details", "step", "evidence"}``) on stdout each time the
verdict changes. The end of its stdin says the job has ended: it evaluates what is left and
ends with the final verdict. A finding ends it at once. What goes wrong is a verdict with
status ``Error`` and one line saying what.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

_MAX_REQUEST = 64 * 1024
_MAX_DETAILS = 1024
_SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime")
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000


def _say(verdict: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(verdict, allow_nan=False, default=str) + "\n")
    sys.stdout.flush()


def _error(line: str) -> dict[str, Any]:
    return {"status": "Error", "details": line[:_MAX_DETAILS], "step": None, "evidence": {}}


def _readable(request: dict[str, Any], src_root: Path) -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(src_root)}
    paths.update(
        v
        for k, v in sysconfig.get_paths().items()
        if k in ("stdlib", "platstdlib", "purelib", "platlib")
    )
    paths.update(_SYSTEM_READABLE)
    paths.update({str(request["code"]), str(request["trial"])})
    return sorted(paths)


def _load_rule(request: dict[str, Any]) -> type:
    source = Path(request["source"]).resolve()
    code = Path(request["code"]).resolve()
    if not source.is_relative_to(code) or source.suffix != ".py":
        raise ValueError("the rule's source must be a .py file inside the job's source folder")
    sys.path.insert(0, str(code))
    compat = Path(__file__).resolve().parents[1] / "_compat"
    if compat.is_dir():  # ``import smdebug`` works as in the job, after the job's own code
        sys.path.insert(1, str(compat))
    spec = importlib.util.spec_from_file_location("trainops_custom_rule", source)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {source.name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, str(request["rule_to_invoke"]), None)
    if not isinstance(found, type) or not callable(getattr(found, "invoke_at_step", None)):
        raise ValueError(
            f"{source.name} has no rule class {request['rule_to_invoke']!r} with invoke_at_step"
        )
    return found


def _run(request: dict[str, Any], ended: threading.Event) -> dict[str, Any]:
    from trainops.debugger import create_trial
    from trainops.debugger.rules import ISSUES_FOUND, NO_ISSUES_FOUND, RuleRunner

    cls = _load_rule(request)
    trial = create_trial(str(request["trial"]))
    parameters = {str(k): str(v) for k, v in dict(request.get("parameters") or {}).items()}
    runner = RuleRunner(cls(trial, **parameters))
    poll = float(request.get("poll_seconds", 1.0))
    last: dict[str, Any] = {}
    while True:
        final = ended.is_set()
        verdict = runner.advance(time.time(), ended=final)
        shown = {
            "status": verdict.status,
            "details": verdict.details[:_MAX_DETAILS],
            "step": verdict.step,
            "evidence": verdict.evidence,
        }
        if verdict.status in (ISSUES_FOUND, NO_ISSUES_FOUND):
            return shown
        if shown != last:
            _say(shown)
            last = shown
        ended.wait(poll)


def _watch_stdin(ended: threading.Event) -> None:
    sys.stdin.buffer.read()
    ended.set()


def _own_pid_namespace() -> None:
    """Run the rest in a new PID namespace, as its pid 1: this process forks the child and
    waits, then ends as the child ended. When the kernel refuses the namespace (no user
    namespaces for this user, a container's seccomp), the rule runs here, as before."""
    flags = _CLONE_NEWPID if os.geteuid() == 0 else _CLONE_NEWPID | _CLONE_NEWUSER
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        return
    child = os.fork()  # the namespace's pid 1: its end ends every process the rule started
    if child == 0:
        return
    os.close(0)  # the child watches its input for the job's end; this process only waits
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def main() -> int:
    """Run the rule the request on stdin names (see the module docstring)."""
    src_root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(src_root))
    raw = sys.stdin.buffer.readline(_MAX_REQUEST)
    os.nice(10)  # the rule yields to the control plane
    _own_pid_namespace()
    try:
        request = json.loads(raw)
        from trainops.debugger.rules._sandbox import confine

        confine(
            _readable(request, src_root),
            memory_bytes=int(request["memory_mb"]) << 20,
            cpu_seconds=int(request["cpu_seconds"]),
        )
    except Exception as exc:
        _say(_error(f"cannot start the rule: {type(exc).__name__}: {exc}"))
        return 2
    ended = threading.Event()
    threading.Thread(target=_watch_stdin, args=(ended,), daemon=True).start()
    try:
        _say(_run(request, ended))
    except MemoryError:
        _say(_error("the rule ran out of memory (memory_mb)"))
        return 1
    except BaseException as exc:  # the rule's own failure is its verdict
        lines = str(exc).strip().splitlines()
        _say(_error(f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
