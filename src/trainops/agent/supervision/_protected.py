"""What a job's script may read and run but never change, and the home it gets instead of the
user's.

Every process of a job runs as the user who runs trainops, so without more a script could write
wherever that user can: plant code in the Python installation the server and the agents run
from (its site-packages, trainops' own source in an editable install), which the server would
then run with its own powers, or read the user's own files (``~/.aws/credentials``, SSH keys,
the tokens of other tools). In the host's namespaces (``_hostns_exec --hold``):

- :func:`python_installation`: the interpreter's prefixes and every directory on the agent's
  ``sys.path`` (and the job's own interpreter's prefix, where the images setting names one) are
  bound onto themselves read-only. A directory that holds the temporary directory, the trainops
  home or the job's files is never made read-only: a ``PYTHONPATH`` naming ``/tmp`` must not
  take ``/tmp`` from every job.
- :func:`user_home`: the user's home is masked like ``$TRAINOPS_HOME``; the script's ``HOME``
  is a private directory of the host's own (:func:`private_home`), writable, so that caches
  (``~/.cache``) and tools' settings still work, each job apart.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["private_home", "python_installation", "user_home"]

HOME_DIR = "home"


def private_home(state_dir: Path) -> Path:
    """The host's own home (``HOME`` of its script), made private (0700) if new."""
    home = state_dir / HOME_DIR
    home.mkdir(mode=0o700, exist_ok=True)
    return home


def user_home() -> Path | None:
    """The user's home, to mask; None where it is ``/`` or not a directory."""
    home = Path(os.path.expanduser("~"))
    return home if str(home) != "/" and home.is_dir() else None


def python_installation(job_python: str | None, spared: Sequence[Path]) -> tuple[Path, ...]:
    """The directories to show read-only: the interpreter's installation and ``sys.path``,
    and ``job_python``'s prefix; none that is (or holds) one of ``spared`` (the trainops home,
    the host's files) or the temporary directory."""
    found = [*_installed(), *_prefix_of(job_python)]
    keep_writable = [os.path.realpath(str(p)) for p in (*spared, tempfile.gettempdir())]
    chosen = [p for p in found if not any(_at_or_above(p, w) for w in keep_writable)]
    outermost = [p for p in chosen if not any(q != p and _at_or_above(q, p) for q in chosen)]
    return tuple(Path(p) for p in dict.fromkeys(outermost))


@functools.cache
def _installed() -> tuple[str, ...]:
    """The agent's own interpreter: its prefixes and the existing directories on its path."""
    places = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path]
    real = [os.path.realpath(str(p)) for p in places if p and os.path.isdir(p)]
    return tuple(p for p in dict.fromkeys(real) if p != "/")


def _prefix_of(python: str | None) -> list[str]:
    """``<prefix>`` of an interpreter at ``<prefix>/bin/python…`` (a virtual environment's
    too, and the real one it links to)."""
    if not python:
        return []
    prefixes = []
    for path in (python, os.path.realpath(python)):
        bin_dir = os.path.dirname(path)
        if os.path.basename(bin_dir) == "bin":
            prefixes.append(os.path.dirname(bin_dir))
    return [p for p in prefixes if p not in ("", "/") and os.path.isdir(p)]


def _at_or_above(path: str, other: str) -> bool:
    return other == path or other.startswith(path.rstrip("/") + "/")
