"""Checking an archive before anything is written: every header, every link, every limit.

Only tar headers are read here (a member's data is skipped, not kept), so a hostile archive is
refused before a byte lands on disk. Names are normalised into path components; ``..``,
absolute names, devices, FIFOs and over-long names are refused. A member whose path passes
through a symbolic link of the archive is refused, and every symbolic link is resolved the way
the kernel would resolve it, through the archive's other links, so no chain of links (the
CVE-2025-4517 shape, whose lexical length defeats ``os.path.realpath``) can point outside the
target. Hard links must name an earlier regular file and are extracted as copies, so their
bytes count against the limits like any file's.
"""

from __future__ import annotations

import tarfile
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from trainops._errors import ArchiveError
from trainops.archive._limits import ArchiveLimits

__all__ = ["Entry", "EntryKind", "Plan", "plan_extraction", "shown"]

Parts = tuple[str, ...]
MAX_LINK_HOPS = 40  # the kernel's own limit (ELOOP)
MAX_COMPONENT_BYTES = 255


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symbolic link"
    HARDLINK = "hard link"


@dataclass(frozen=True, slots=True)
class Entry:
    """One member to extract: where it goes and what it is."""

    member: tarfile.TarInfo
    parts: Parts
    kind: EntryKind
    source: Parts = ()  # a hard link's file


@dataclass(slots=True)
class Plan:
    """The checked entries of one archive, in archive order."""

    archive: str
    entries: list[Entry] = field(default_factory=list)
    kinds: dict[Parts, EntryKind] = field(default_factory=dict)
    sizes: dict[Parts, int] = field(default_factory=dict)
    links: dict[Parts, str] = field(default_factory=dict)
    total_bytes: int = 0

    def refuse(self, member: tarfile.TarInfo, reason: str) -> ArchiveError:
        return ArchiveError(f"{self.archive}: entry {shown(member.name)} rejected: {reason}")


def shown(name: str, limit: int = 120) -> str:
    """``name`` quoted for a message, its middle elided when it is long."""
    if len(name) <= limit:
        return repr(name)
    return repr(f"{name[: limit - 40]}…{name[-30:]}")


def plan_extraction(
    tar: tarfile.TarFile, archive: str, archive_bytes: int, limits: ArchiveLimits
) -> Plan:
    """Read every header of ``tar`` and check it; raises :class:`ArchiveError` on the first problem."""
    plan = Plan(archive)
    cap = limits.expansion_cap(archive_bytes)
    while (member := tar.next()) is not None:
        if len(plan.entries) >= limits.max_members:
            raise plan.refuse(
                member,
                f"the archive has more than {limits.max_members:,} entries "
                "(limit archive.max_members)",
            )
        entry = _entry(plan, member, limits)
        _add(plan, entry, cap, limits)
    for entry in plan.entries:
        if entry.kind is EntryKind.SYMLINK:
            _check_symlink(plan, entry)
    return plan


def _entry(plan: Plan, member: tarfile.TarInfo, limits: ArchiveLimits) -> Entry:
    parts = _parts(plan, member, member.name, limits)
    if member.isreg():
        return Entry(member, parts, EntryKind.FILE)
    if member.isdir():
        return Entry(member, parts, EntryKind.DIRECTORY)
    if member.issym():
        if not member.linkname or len(member.linkname) > limits.max_path_length:
            raise plan.refuse(
                member, f"link target must be 1-{limits.max_path_length:,} characters"
            )
        if member.linkname.startswith("/"):
            raise plan.refuse(member, "link points outside the target directory (absolute)")
        return Entry(member, parts, EntryKind.SYMLINK)
    if member.islnk():
        source = _parts(plan, member, member.linkname, limits)
        if plan.kinds.get(source) is not EntryKind.FILE:
            raise plan.refuse(member, "hard link must point to an earlier file of the archive")
        return Entry(member, parts, EntryKind.HARDLINK, source)
    raise plan.refuse(member, "device, FIFO or other special entries are not allowed")


def _parts(plan: Plan, member: tarfile.TarInfo, name: str, limits: ArchiveLimits) -> Parts:
    if name.startswith("/"):
        raise plan.refuse(member, "absolute path")
    if len(name) > limits.max_path_length:
        raise plan.refuse(
            member,
            f"name is {len(name):,} characters; at most {limits.max_path_length:,} "
            "(limit archive.max_path_length)",
        )
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise plan.refuse(member, "would be written outside the target directory ('..')")
    if not parts:
        raise plan.refuse(member, "empty name")
    if "\0" in name or any(
        len(p.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES for p in parts
    ):
        raise plan.refuse(member, "invalid name (NUL byte or a component over 255 bytes)")
    return parts


def _add(plan: Plan, entry: Entry, cap: int, limits: ArchiveLimits) -> None:
    for depth in range(1, len(entry.parts)):
        parent = entry.parts[:depth]
        kind = plan.kinds.setdefault(parent, EntryKind.DIRECTORY)
        if kind is not EntryKind.DIRECTORY:
            raise plan.refuse(entry.member, f"its path goes through a {kind} ({'/'.join(parent)})")
    previous = plan.kinds.get(entry.parts)
    repeatable = previous is entry.kind and entry.kind in (EntryKind.FILE, EntryKind.DIRECTORY)
    if previous is not None and not repeatable:
        raise plan.refuse(entry.member, f"the archive already has a {previous} there")
    size = _size(plan, entry, limits)
    plan.total_bytes += size
    if plan.total_bytes > cap:
        raise plan.refuse(
            entry.member,
            f"the archive expands to more than {cap:,} bytes (limits archive.max_total_bytes, "
            "archive.max_ratio)",
        )
    plan.kinds[entry.parts] = entry.kind
    plan.sizes[entry.parts] = size
    if entry.kind is EntryKind.SYMLINK:
        plan.links[entry.parts] = entry.member.linkname
    plan.entries.append(entry)


def _size(plan: Plan, entry: Entry, limits: ArchiveLimits) -> int:
    if entry.kind is EntryKind.HARDLINK:
        return plan.sizes[entry.source]
    if entry.kind is not EntryKind.FILE:
        return 0
    if entry.member.size > limits.max_member_bytes:
        raise plan.refuse(
            entry.member,
            f"{entry.member.size:,} bytes; one file may have at most "
            f"{limits.max_member_bytes:,} (limit archive.max_member_bytes)",
        )
    return entry.member.size


def _check_symlink(plan: Plan, entry: Entry) -> None:
    """Resolve the link as the kernel would, through the archive's own links; refuse escapes."""
    stack = list(entry.parts[:-1])
    pending = deque(entry.member.linkname.split("/"))
    hops = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                raise plan.refuse(entry.member, "link points outside the target directory")
            stack.pop()
            continue
        stack.append(part)
        target = plan.links.get(tuple(stack))
        if target is not None:
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise plan.refuse(entry.member, "too many levels of symbolic links")
            if target.startswith("/"):
                raise plan.refuse(entry.member, "link points outside the target directory")
            stack.pop()
            pending.extendleft(reversed(target.split("/")))
