"""What this machine lets a job's hosts have: private namespaces, and the tree at /opt/ml.

A job's host runs in namespaces of its own (``trainops.agent.supervision._hostns``) wherever the machine
allows them: root with ``CAP_SYS_ADMIN``, or unprivileged user namespaces. There its tree is
shown at the real ``/opt/ml`` too, where ``/opt`` can take it. :func:`containment` asks the
machine once (the namespace program's ``--probe``, with a scratch tree to show at /opt/ml) and
keeps the answer; :meth:`Containment.note` is the one line a submission shows when either cannot
be had, and why. The local backend asks here (its agents run on this machine); a backend whose
agents run elsewhere asks its nodes (``trainops.backends``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops._hostns_exec import PROBE_NO_OPT_ML

__all__ = ["Containment", "containment", "probe"]

_PROBE = (sys.executable, "-S", str(Path(__file__).resolve().parent / "_hostns_exec.py"))
_PROBE_SECONDS = 30.0
_WHY_CHARS = 200
_NAMESPACE_FAILED = "cannot give this host its own namespace: "
_lock = threading.Lock()
_probed: Containment | None = None


@dataclass(frozen=True, slots=True)
class Containment:
    """Whether a host's private ``namespaces`` can be made here, whether its tree can be shown
    at ``/opt/ml`` in them, and ``why`` not (the machine's own words), empty when both can."""

    namespaces: bool
    opt_ml: bool
    why: str = ""

    def note(self, mount_opt_ml: bool) -> str | None:
        """The one line to show at submission (``mount_opt_ml``: the job asks for /opt/ml), or
        None where the job gets all it asks for."""
        if not self.namespaces:
            shown = ", and /opt/ml is not shown" if mount_opt_ml else ""
            return (
                f"this machine allows no private namespaces ({self.why}; needs root or "
                "unprivileged user namespaces): the job's processes run unisolated, seeing "
                f"$TRAINOPS_HOME and every process of this user{shown}"
            )
        if mount_opt_ml and not self.opt_ml:
            return (
                f"/opt/ml is not shown ({self.why}): the job's scripts find their tree "
                "through the SM_* variables, and a checkpoint path under /opt/ml is refused"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {"namespaces": self.namespaces, "opt_ml": self.opt_ml, "why": self.why}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Containment:
        return cls(bool(data["namespaces"]), bool(data["opt_ml"]), str(data.get("why", "")))


def containment() -> Containment:
    """This machine's answer, probed on first use and kept (thread-safe)."""
    global _probed
    with _lock:
        if _probed is None:
            _probed = probe()
        return _probed


def probe() -> Containment:
    """Ask this machine now: make a host's namespaces and show a scratch tree at /opt/ml in
    them, in a process that then ends (nothing outside it changes)."""
    with tempfile.TemporaryDirectory(prefix="trainops-probe-") as root:
        argv = [*_PROBE, "--probe", "--opt-ml", root]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            return Containment(False, False, f"the probe took over {_PROBE_SECONDS:.0f} s")
        except OSError as exc:
            return Containment(False, False, f"the probe did not start: {exc.strerror or exc}")
    if done.returncode == 0:
        return Containment(True, True)
    why = _why(done.stderr.decode(errors="replace"))
    return Containment(done.returncode == PROBE_NO_OPT_ML, False, why)


def _why(stderr: str) -> str:
    """The probe's last line of error, without its prefix, on one line and bounded."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "the probe failed without a word"
    why = lines[-1].removeprefix("trainops: ").removeprefix(_NAMESPACE_FAILED)
    return why[:_WHY_CHARS]
