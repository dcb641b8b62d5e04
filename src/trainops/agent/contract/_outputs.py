"""Where a host's outputs go under the job's output prefix, and uploading them.

One host uploads ``output/model.tar.gz`` and ``output/output.tar.gz``; with several hosts each
uploads ``output/model-parts/<host>.tar.gz`` and ``output/output-parts/<host>.tar.gz`` and the
control plane merges the parts. Intermediate files go to ``output/intermediate/`` (plus
``<host>/`` with several hosts) and the host log to ``logs/<host>.log``
(``<host>-attempt-N.log`` on retries).

Uncompressed (``disable_output_compression``, SageMaker's ``CompressionType: NONE``), the files
themselves go up instead: to ``output/model/`` and ``output/data/``, or with several hosts to
``output/model-parts/<host>/`` and ``output/data-parts/<host>/`` for the control plane to merge;
what an earlier attempt left under that prefix and this one did not write is removed after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainops.agent.contract._tree import HostTree
from trainops.archive import pack
from trainops.storage import ObjectStore, join_uri, upload_tree

__all__ = ["Artifact", "OutputLayout", "upload_archives", "upload_log"]

_LINKS_NAMED = 10  # symbolic links named one by one in the host log, at most


@dataclass(frozen=True, slots=True)
class Artifact:
    """One uploaded artifact, as reported in an ``artifact`` event."""

    name: str
    uri: str


@dataclass(frozen=True, slots=True)
class OutputLayout:
    """The object names of one host's outputs."""

    output_prefix: str
    host: str
    host_count: int
    attempt: int = 1
    compressed: bool = True

    @property
    def multi_host(self) -> bool:
        return self.host_count > 1

    def archive(self, kind: str) -> Artifact:
        """``kind`` is ``model`` or ``output``."""
        if self.multi_host:
            uri = join_uri(self.output_prefix, "output", f"{kind}-parts", f"{self.host}.tar.gz")
            return Artifact(f"{kind}_part", uri)
        return Artifact(kind, join_uri(self.output_prefix, "output", f"{kind}.tar.gz"))

    def files(self, kind: str) -> Artifact:
        """Where an uncompressed ``kind`` (``model`` or ``output``) goes: a prefix, ending in
        ``/`` as SageMaker gives an uncompressed model's location."""
        folder = "model" if kind == "model" else "data"
        if self.multi_host:
            uri = join_uri(self.output_prefix, "output", f"{folder}-parts", self.host)
            return Artifact(f"{kind}_part", uri + "/")
        return Artifact(kind, join_uri(self.output_prefix, "output", folder) + "/")

    @property
    def intermediate_prefix(self) -> str:
        base = join_uri(self.output_prefix, "output", "intermediate")
        return join_uri(base, self.host) if self.multi_host else base

    @property
    def log(self) -> Artifact:
        name = self.host if self.attempt <= 1 else f"{self.host}-attempt-{self.attempt}"
        return Artifact("log", join_uri(self.output_prefix, "logs", f"{name}.log"))


def upload_archives(
    store: ObjectStore,
    tree: HostTree,
    layout: OutputLayout,
    work_dir: Path,
    log: Callable[[str], None] = lambda line: None,
) -> list[Artifact]:
    """Pack ``model/`` and ``output/data/`` and upload them (or upload their files, where the
    layout is not compressed: a symbolic link, which an archive would keep as a link, has no
    object to be, and ``log`` hears it named)."""
    uploaded = []
    for kind, source in (("model", tree.model_dir), ("output", tree.output_data_dir)):
        source.mkdir(parents=True, exist_ok=True)
        if not layout.compressed:
            _name_links(source, tree.root, log)
            uploaded.append(_upload_files(store, source, layout.files(kind)))
            continue
        artifact = layout.archive(kind)
        archive = pack(source, work_dir / f"{kind}.tar.gz")
        store.upload(archive, artifact.uri)
        archive.unlink()
        uploaded.append(artifact)
    return uploaded


def _name_links(source: Path, root: Path, log: Callable[[str], None]) -> None:
    """Name the first :data:`_LINKS_NAMED` symbolic links under ``source`` (and count the rest:
    a script may leave any number of them)."""
    links = sorted(p for p in source.rglob("*") if p.is_symlink())
    for link in links[:_LINKS_NAMED]:
        shown = link.relative_to(root).as_posix()
        log(f"{shown!r} is a symbolic link: not uploaded (outputs go up uncompressed)")
    if len(links) > _LINKS_NAMED:
        log(f"... and {len(links) - _LINKS_NAMED} more symbolic links, not uploaded either")


def _upload_files(store: ObjectStore, source: Path, artifact: Artifact) -> Artifact:
    """Upload every file under ``source`` below the artifact's prefix, then remove what else is
    there (an earlier attempt's files that this one did not write)."""
    prefix = artifact.uri.rstrip("/")
    written = {uri[len(prefix) + 1 :] for uri in upload_tree(store, source, prefix)}
    for info in store.list_objects(prefix + "/"):
        if info.key not in written:
            store.delete(info.uri)
    return artifact


def upload_log(store: ObjectStore, log_file: Path, layout: OutputLayout) -> Artifact:
    artifact = layout.log
    store.upload(log_file, artifact.uri)
    return artifact
