"""What the machine lets a job's hosts have, asked once, and said in one line at submission.

The probe runs for real: on this machine, in a process that lost ``CAP_SYS_ADMIN`` (a Docker
container's root: no namespaces), and in a mount namespace whose ``/opt`` cannot take ``ml``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trainops import _containment
from trainops._containment import Containment, containment, probe

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the suite runs as root in CI)")

# The probe, asked from a process that keeps only Docker's default capabilities.
WITHOUT_SYS_ADMIN = """
import json
from trainops._hostns_caps import contain
from trainops._containment import probe
contain()
print(json.dumps(probe().to_json()))
"""

# The probe, asked from a private mount namespace whose /opt holds a file named ml.
OPT_ML_IS_A_FILE = """
import ctypes, json, os
from trainops._containment import probe
libc = ctypes.CDLL("libc.so.6", use_errno=True)
assert libc.unshare(0x00020000) == 0  # CLONE_NEWNS
assert libc.mount(None, b"/", None, 16384 | (1 << 18), None) == 0  # MS_REC | MS_PRIVATE
assert libc.mount(b"tmpfs", b"/opt", b"tmpfs", 0, None) == 0
open("/opt/ml", "w").close()
print(json.dumps(probe().to_json()))
"""


def _asked(script: str) -> Containment:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    answer: dict[str, object] = json.loads(done.stdout)
    return Containment.from_json(answer)


def test_the_answer_is_asked_once_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_containment, "_probed", None)
    first = containment()
    assert containment() is first
    assert first == probe()  # the same machine answers the same


@AS_ROOT
def test_this_machine_gives_namespaces_and_opt_ml() -> None:
    assert probe() == Containment(True, True)
    assert probe().note(True) is None


@AS_ROOT
def test_without_cap_sys_admin_there_are_no_namespaces_and_the_note_says_why() -> None:
    answer = _asked(WITHOUT_SYS_ADMIN)
    assert not answer.namespaces and not answer.opt_ml
    assert "unshare: Operation not permitted" in answer.why
    note = answer.note(True)
    assert note is not None and "\n" not in note
    assert "unisolated" in note and "$TRAINOPS_HOME" in note and "/opt/ml is not shown" in note
    assert "/opt/ml" not in (answer.note(False) or "")  # not asked for: not mentioned


@AS_ROOT
def test_an_opt_that_cannot_take_ml_leaves_the_namespaces_and_says_so() -> None:
    answer = _asked(OPT_ML_IS_A_FILE)
    assert answer.namespaces and not answer.opt_ml
    assert "/opt/ml cannot be shown here" in answer.why
    note = answer.note(True)
    assert note is not None and note.startswith("/opt/ml is not shown (") and "\n" not in note
    assert answer.note(False) is None  # a job that opted out of /opt/ml loses nothing


def test_the_answer_travels_as_json() -> None:
    answer = Containment(True, False, "why")
    assert Containment.from_json(json.loads(json.dumps(answer.to_json()))) == answer
