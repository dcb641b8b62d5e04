"""What the tests of channels shown through binds share (FastFile, FileSystem): specs of them,
and what a script of the job sees, read by a real process in a namespace like the script's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainops.agent.channels import Bind
from trainops.agent.supervision._hostns import mount_arguments
from trainops.protocol import ChannelSpec
from trainops.spec import JobSpec

# Run in the job's namespace: every file under the directory, with its bytes' sha256 and size,
# and whether a write into it is refused (and how).
_LOOK = """
import hashlib, json, os, sys
top, probe = sys.argv[1], sys.argv[2] == "1"
files = {}
for dirpath, _dirs, names in os.walk(top):
    for name in names:
        path = os.path.join(dirpath, name)
        with open(path, "rb") as handle:
            files[os.path.relpath(path, top)] = hashlib.sha256(handle.read()).hexdigest()
write = None
if probe:
    try:
        with open(os.path.join(top, "written-by-the-script"), "w") as handle:
            handle.write("x")
        write = "ok"
    except OSError as exc:
        write = exc.errno
print(json.dumps({"files": files, "write": write}))
"""


def filesystem_channel(path: str, name: str = "train", **fields: Any) -> ChannelSpec:
    """A file-system channel ``name`` of ``path``, as a validated spec hands it to the agent."""
    inputs: Any = {name: {"file_system": {"directory_path": path, **fields}}}
    spec = JobSpec(entry_point="train.py", inputs=inputs)
    return spec.view().inputs[0]


def seen_by_script(
    target: Path, binds: Sequence[Bind], *, try_write: bool = False, timeout: float = 60
) -> dict[str, Any]:
    """``{"files": {relative path: sha256}, "write": None | "ok" | errno}`` as a process of the
    job sees ``target`` (a channel directory) with ``binds`` applied."""
    look = [sys.executable, "-c", _LOOK, str(target), "1" if try_write else "0"]
    argv = [sys.executable, "-m", "trainops._hostns_exec", *mount_arguments(binds), "--", *look]
    done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def sees_files(target: Path, binds: Sequence[Bind]) -> bool:
    return bool(seen_by_script(target, binds)["files"])


def fuse_mounts() -> list[str]:
    """The FUSE mounts in the machine's own mount table (a FastFile view must never be one)."""
    table = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    return [line for line in table if " - fuse" in line]
