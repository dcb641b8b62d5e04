"""The mounts a job host's process gets inside its private mount namespace (``_hostns_exec``).

- :func:`bind`: a directory shown at another path (a file-system channel, a FastFile view on
  ``file://``), made read-only for this namespace alone when asked;
- :func:`graft`: a mount that lives in *another* mount namespace (a FastFile channel's FUSE
  mount, made by rclone in a namespace of its own so that it dies with rclone) cloned into this
  one: enter that namespace, ``open_tree(OPEN_TREE_CLONE)`` the mount, come back and
  ``move_mount`` the detached copy into place (Linux 5.2 or later);
- :func:`show_opt_ml`: the host's job tree at the real ``/opt/ml``. ``/opt/ml`` is bound over
  where it exists; otherwise a tmpfs covers ``/opt`` in this namespace, every entry of the
  machine's ``/opt`` is bound back into it, ``ml`` is added, and the tmpfs is made read-only.
  Nothing is ever written to the machine's own ``/opt``.
- :func:`mask_all`: directories the job must not see (``$TRAINOPS_HOME``, the parent of the
  remote-shell sockets, the machine's ``/dev``) covered by an empty tmpfs (with the mode and
  owner of the directory it covers, as are the directories made in it), with only the paths
  the job may use (its own tree, its Python environment, its own socket directory, the device
  nodes a container gets) bound back at their places; the tmpfs is then made read-only;
- :func:`make_read_only`: every mount at and below a path read-only in this namespace (``/sys``,
  the kernel's knobs under ``/proc``), as a container's are;
- :func:`protect`: directories the job may read and run but never change (the Python
  installation the agents and the server run from: its prefixes, its site-packages, trainops'
  own source) bound onto themselves read-only, so that no script can plant code that the
  server or another job would run.

Standard library only (ctypes), like ``_hostns_exec``: it runs before every rank's process.
"""

from __future__ import annotations

import ctypes
import os
import stat

__all__ = [
    "OPT",
    "OPT_ML",
    "bind",
    "graft",
    "make_read_only",
    "mask_all",
    "mount_proc",
    "mounts_under",
    "protect",
    "show_opt_ml",
]

OPT = "/opt"  # strings, not pathlib: it costs start-up before every rank (see _hostns_exec)
OPT_ML = "/opt/ml"
CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_RELATIME = 1 << 21
# statvfs's ST_* bits that a read-only remount must keep (a user namespace may not clear them)
_KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME, 2048: MS_NODIRATIME}
_ST_RELATIME = 4096
SYS_OPEN_TREE = 428  # the same number on every architecture (new syscalls share one table)
SYS_MOVE_MOUNT = 429
OPEN_TREE_CLONE = 1
AT_RECURSIVE = 0x8000
AT_FDCWD = -100
MOVE_MOUNT_F_EMPTY_PATH = 4


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6", use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    raw = [None if text is None else text.encode() for text in (source, fstype, data or None)]
    _check(_libc().mount(raw[0], target.encode(), raw[1], flags, raw[2]), f"mount {target}")


def _make_read_only(target: str) -> None:
    """Remount a bind read-only, keeping the flags it already has."""
    current = os.statvfs(target).f_flag
    kept = sum(flag for bit, flag in _KEPT_FLAGS.items() if current & bit)
    kept |= MS_RELATIME if current & _ST_RELATIME else 0
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def bind(source: str, target: str, read_only: bool) -> None:
    """``source`` (with whatever is mounted below it) shown at ``target``; read-only means the
    mounts below it too (a remount reaches one mount only, so each is remounted)."""
    _mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        for point in mounts_under(target):
            _make_read_only(point)


def mounts_under(target: str, mountinfo: str | None = None) -> list[str]:
    """``target`` and every mount point below it in this namespace, outermost first
    (``mountinfo``: the text of ``/proc/self/mountinfo``, read when not given)."""
    if mountinfo is None:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            mountinfo = handle.read()
    base = os.path.realpath(target)
    inside = base + "/" if base != "/" else "/"
    found = {base}
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            point = _unescape(fields[4])
            if point.startswith(inside):
                found.add(point)
    return sorted(found, key=lambda p: (p.count("/"), p))


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come as ``\\ooo`` escapes."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def graft(namespace: str, inode: int, source: str, target: str, read_only: bool) -> None:
    """The mount at ``source`` in ``namespace`` (a ``/proc/<pid>/ns/mnt``) shown at ``target``.

    ``inode`` is the namespace's, as the agent saw it: a pid reused by another process since
    then names another namespace, and that is refused rather than grafting the wrong tree.
    """
    libc = _libc()
    other = os.open(namespace, os.O_RDONLY | os.O_CLOEXEC)
    own = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    here = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if os.fstat(other).st_ino != inode:
            raise OSError(f"{namespace}: not the mount namespace it was (its process ended)")
        _check(libc.setns(other, CLONE_NEWNS), f"setns {namespace}")
        try:
            flags = OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE
            tree = _check(
                libc.syscall(SYS_OPEN_TREE, AT_FDCWD, source.encode(), flags), "open_tree"
            )
        finally:
            _check(libc.setns(own, CLONE_NEWNS), "setns back")
            os.fchdir(here)
        try:
            move = (SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)
            _check(libc.syscall(*move), f"move_mount {target}")
        finally:
            os.close(tree)
    finally:
        for fd in (other, own, here):
            os.close(fd)
    if read_only:
        _make_read_only(target)


def show_opt_ml(root: str) -> None:
    """``root`` at ``/opt/ml`` in this namespace; refused where there is no ``/opt`` to use."""
    if os.path.isdir(OPT_ML) and not os.path.islink(OPT_ML):
        bind(root, OPT_ML, read_only=False)
        return
    if not os.path.isdir(OPT) or os.path.islink(OPT) or os.path.lexists(OPT_ML):
        raise OSError(
            "/opt/ml cannot be shown here: /opt must be a directory (and /opt/ml absent or a "
            "directory) on this machine; nothing is created there"
        )
    _cover_opt()
    os.mkdir(OPT_ML)
    bind(root, OPT_ML, read_only=False)
    _mount(None, OPT, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _cover_opt() -> None:
    """A tmpfs over ``/opt`` holding the machine's entries of ``/opt`` (bound back) only."""
    keep = os.open(OPT, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        names = os.listdir(f"/proc/self/fd/{keep}")
        _mount("tmpfs", OPT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        for name in names:
            _keep_entry(f"/proc/self/fd/{keep}/{name}", os.path.join(OPT, name))
    finally:
        os.close(keep)


def _keep_entry(
    original: str,
    place: str,
    read_only: bool = False,
    parents: bool = False,
    looks: dict[str, os.stat_result] | None = None,
) -> None:
    """``original`` (reached through a ``/proc/self/fd`` descriptor) shown at ``place`` in a
    fresh tmpfs, with the directories above it made when ``parents`` (given the mode and owner
    they have on the machine: ``looks``, taken before the tmpfs hid them)."""
    mode = os.lstat(original).st_mode if not parents else os.stat(original).st_mode
    if parents:
        os.makedirs(os.path.dirname(place), exist_ok=True)
        _restore_looks(os.path.dirname(place), looks)
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(original), place)
        return
    if stat.S_ISDIR(mode):
        _mkdir(place, exist_ok=parents)
    else:
        os.close(os.open(place, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666))  # a touch
    bind(original, place, read_only=read_only)


def _mkdir(path: str, exist_ok: bool) -> None:
    try:
        os.mkdir(path)
    except FileExistsError:
        if not exist_ok or not os.path.isdir(path):
            raise


def make_read_only(target: str) -> None:
    """``target`` and every mount below it read-only in this namespace."""
    for point in mounts_under(target):
        _make_read_only(point)


def protect(paths: list[str]) -> None:
    """Each existing directory of ``paths`` (the outermost of them; never ``/``) bound onto
    itself read-only, with every mount below it. Run before :func:`mask_all`: a protected
    directory under a mask is then bound back read-only as a kept path."""
    real = [os.path.realpath(p) for p in paths if os.path.isdir(p)]
    for path in _outermost([p for p in real if p != "/"]):
        bind(path, path, read_only=True)


def mount_proc() -> None:
    """A fresh ``/proc`` for this process's PID namespace (it lists that namespace's processes
    only), with the kernel's knobs below it read-only, as in a container."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("sys", "sysrq-trigger", "bus", "fs", "irq"):
        place = f"/proc/{name}"
        if os.path.exists(place):
            _mount(place, place, None, MS_BIND | MS_REC)
            _make_read_only(place)


def mask_all(masks: list[str], keeps: list[tuple[str, bool]]) -> None:
    """Cover each of ``masks`` with an empty tmpfs and bind back each of ``keeps`` (a path and
    whether it is read-only) that lies below one; the tmpfs are then made read-only. A mask
    below another, or that is not a directory, is left out (the outer one hides it)."""
    covered = _outermost([os.path.realpath(m) for m in masks if os.path.isdir(m)])
    kept = [(_real_parent(path), ro) for path, ro in keeps if os.path.lexists(path)]
    kept = [(path, ro) for path, ro in kept if any(_below(path, mask) for mask in covered)]
    links = [(path, os.readlink(path)) for path, _ro in kept if os.path.islink(path)]
    opened = [
        (os.open(path, os.O_PATH | os.O_CLOEXEC), path, ro)
        for path, ro in kept
        if not os.path.islink(path)
    ]
    looks = _looks_below(covered, [path for path, _ro in kept])
    try:
        for mask in covered:
            _mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, _tmpfs_options(looks[mask]))
        for fd, path, ro in opened:
            _keep_entry(f"/proc/self/fd/{fd}", path, ro, parents=True, looks=looks)
        for path, target in links:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _restore_looks(os.path.dirname(path), looks)
            os.symlink(target, path)
        for mask in covered:
            _mount(None, mask, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    finally:
        for fd, _path, _ro in opened:
            os.close(fd)


def _looks_below(covered: list[str], kept: list[str]) -> dict[str, os.stat_result]:
    """The machine's mode and owner of each mask and of every directory between a mask and a
    kept path: the tmpfs and the directories made in it look as they do outside (a private
    directory stays private inside the job too, where a nested trainops checks it)."""
    looks = {mask: os.stat(mask) for mask in covered}
    for path in kept:
        above = os.path.dirname(path)
        while any(_below(above, mask) for mask in covered):
            if above not in looks and os.path.isdir(above):
                looks[above] = os.stat(above)
            above = os.path.dirname(above)
    return looks


def _tmpfs_options(looks: os.stat_result) -> str:
    """The tmpfs's mode, and its owner where we are root (in a user namespace of our own, what
    we make is ours, as the masked directories of a user are)."""
    owner = f",uid={looks.st_uid},gid={looks.st_gid}" if os.geteuid() == 0 else ""
    return f"mode={stat.S_IMODE(looks.st_mode):04o}{owner}"


def _restore_looks(made: str, looks: dict[str, os.stat_result] | None) -> None:
    """Give ``made`` and the directories above it (made in a mask's tmpfs) the mode and owner
    they have on the machine (:func:`_looks_below`; it knows no directory above a mask)."""
    while looks and made in looks:
        if os.geteuid() == 0:
            os.chown(made, looks[made].st_uid, looks[made].st_gid)
        os.chmod(made, stat.S_IMODE(looks[made].st_mode))
        made = os.path.dirname(made)


def _real_parent(path: str) -> str:
    """``path`` with the directories above it resolved (the last part kept as it is)."""
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(head), tail)


def _below(path: str, mask: str) -> bool:
    return path != mask and path.startswith(mask.rstrip("/") + "/")


def _outermost(paths: list[str]) -> list[str]:
    unique = sorted(set(paths), key=len)
    return [p for i, p in enumerate(unique) if not any(_below(p, q) for q in unique[:i])]
