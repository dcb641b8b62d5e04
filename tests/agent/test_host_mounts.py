"""The host namespace's mounts (``_hostns_exec`` with ``trainops._hostns_mounts``), run for real:
binds read-only or not, grafts from another process's mount namespace (refused once that
process is gone), the host's tree at /opt/ml with the machine's /opt kept and untouched, and
how a launch wraps a single-host job's processes when it has mounts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainops._hostns_mounts import mounts_under
from trainops.agent import _ranks
from trainops.agent.channels import Bind
from trainops.agent.contract._setup import ScriptCommand
from trainops.agent.launchers import LaunchError
from trainops.agent.supervision._hostns import mount_arguments
from trainops.agent.supervision._reaper import ProcessTree
from trainops.protocol import Assignment, HostResources
from trainops.spec import JobSpec

HOSTNS = [sys.executable, "-m", "trainops._hostns_exec"]


def _run(args: list[str], shell: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*HOSTNS, *args, "--", "/bin/sh", "-c", shell]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "host-tree"
    (root / "code").mkdir(parents=True)
    (root / "input" / "data" / "train").mkdir(parents=True)
    (root / "code" / "train.py").write_text("print('hi')\n")
    return root


def _opt() -> list[tuple[str, int]]:
    entries = sorted((p.name, p.lstat().st_mtime_ns) for p in Path("/opt").iterdir())
    return [("/opt", os.stat("/opt").st_mtime_ns), *entries]


def test_opt_ml_shows_the_tree_keeps_opt_and_writes_nothing_there(tree: Path) -> None:
    before = _opt()
    shell = 'pwd; ls /opt; cat /opt/ml/code/train.py; touch /opt/new 2>&1 || echo "opt: ro"'
    done = _run(["--opt-ml", str(tree)], shell, cwd=tree / "code")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "/opt/ml/code"  # the working directory is named under /opt/ml
    machine_opt = sorted(p.name for p in Path("/opt").iterdir())
    assert sorted(lines[1 : 1 + len(machine_opt) + 1]) == sorted([*machine_opt, "ml"])
    assert "print('hi')" in done.stdout and "opt: ro" in done.stdout
    assert _opt() == before and not Path("/opt/ml").exists()


def test_a_read_only_bind_refuses_writes_and_rw_takes_them(tmp_path: Path, tree: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    target = tree / "input" / "data" / "train"
    ro = _run(["--bind", str(shared), str(target), "ro"], f"touch {target}/x")
    assert ro.returncode != 0 and "Read-only file system" in ro.stderr
    rw = _run(["--bind", str(shared), str(target), "rw"], f"touch {target}/x")
    assert rw.returncode == 0 and (shared / "x").exists()
    assert not (target / "x").exists()  # the machine's own view never changed


def test_a_bad_mount_mode_is_one_clear_error(tmp_path: Path, tree: Path) -> None:
    done = _run(["--bind", str(tmp_path), str(tree / "code"), "readonly"], "true")
    assert done.returncode == 1
    assert "mount mode 'readonly': use ro or rw" in done.stderr


def test_a_graft_from_a_namespace_that_is_gone_is_refused(tmp_path: Path, tree: Path) -> None:
    holder = subprocess.Popen([*HOSTNS, "--", "sleep", "60"])
    try:
        namespace = Path(f"/proc/{holder.pid}/ns/mnt")
        args = mount_arguments([Bind(tmp_path, tree / "code", True, namespace=namespace)])
        assert args[:3] == ["--graft", str(namespace), str(os.stat(namespace).st_ino)]
        stale = [*args[:2], str(int(args[2]) + 1), *args[3:]]  # as if the pid now were another's
        done = _run(stale, "true")
        assert done.returncode == 1 and "not the mount namespace it was" in done.stderr
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(FileNotFoundError):
        mount_arguments([Bind(tmp_path, tree / "code", True, namespace=namespace)])


def _assignment(**spec: object) -> Assignment:
    job = JobSpec(entry_point="train.py", **spec).view()  # type: ignore[arg-type]
    return Assignment(
        job_name="mounts-job",
        attempt=1,
        spec=job,
        hosts=["algo-1"],
        current_host="algo-1",
        code_uri="",
        output_prefix="file:///tmp/out",
        region="us-east-1",
        resources=HostResources(),
    )


def test_a_single_host_job_with_mounts_runs_in_a_namespace_that_has_them(
    tmp_path: Path, tree: Path
) -> None:
    command = ScriptCommand([sys.executable, "train.py"], sys.executable, [])
    bind = Bind(tmp_path / "data", tree / "input" / "data" / "train", True)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("1\n")
    launch = _ranks.host_processes(_assignment(), command, {}, tmp_path, binds=[bind], opt_ml=tree)
    assert launch.namespace is not None and launch.spawn is not None
    try:
        assert list(launch.processes[0].argv) == [sys.executable, "train.py"]
        shell = ["/bin/sh", "-c", "pwd; ls /opt/ml/input/data/train"]
        # started by the holder, in the tree's code directory: seen under /opt/ml
        process = launch.spawn(
            shell, tree / "code", dict(os.environ), ProcessTree("mounts", use_cgroup=False)
        )
        out, err = process.communicate(timeout=60)
        assert out.decode().split() == ["/opt/ml/code", "a.csv"], err.decode()
    finally:
        launch.namespace.close()


def test_mounts_where_no_namespace_can_be_made_cannot_start(
    tmp_path: Path, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ranks, "namespaces_available", lambda: False)  # such a machine
    command = ScriptCommand([sys.executable, "train.py"], sys.executable, [])
    bind = Bind(tmp_path, tree / "input" / "data" / "train", True)
    with pytest.raises(LaunchError, match="private mount namespace"):
        _ranks.host_processes(_assignment(), command, {}, tmp_path, binds=[bind])


def test_mounts_below_a_bind_are_found_with_escaped_names() -> None:
    info = "\n".join(
        [
            "20 1 8:1 / / rw - ext4 /dev/vda rw",
            r"31 20 0:5 / /data/share rw - tmpfs none rw",
            r"32 31 0:6 / /data/share/a\040b rw - tmpfs none rw",
            r"33 31 0:7 / /data/share/a/deep rw - tmpfs none rw",
            r"34 20 0:8 / /data/shared-not-below rw - tmpfs none rw",
        ]
    )
    assert mounts_under("/data/share", info) == [
        "/data/share",
        "/data/share/a b",
        "/data/share/a/deep",
    ]


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)"
)
def test_a_read_only_bind_is_read_only_below_too(tmp_path: Path, tree: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "sub").mkdir(parents=True)
    target = tree / "input" / "data" / "train"
    inner = " ".join([*HOSTNS, "--bind", str(shared), str(target), "ro", "--", "/bin/sh", "-c"])
    # A file system mounted inside the shared directory (an NFS export with a submount, say)
    # must be read-only in the job's view too, not only the directory's own mount.
    script = (
        f"mount -t tmpfs none {shared}/sub && {inner} 'touch {target}/sub/x 2>&1 || echo sub: ro'"
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sub: ro" in done.stdout, done.stdout
