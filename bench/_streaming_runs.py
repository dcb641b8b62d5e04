"""The systems of bench/streaming.py and how one of their epochs is run and measured.

Each system names its interpreter (this one, or ``.venv-bench``'s for the peers) and the dataset
folder it reads. A run is one child process (``_streaming_loops.py read``); this process samples
the memory of the child's whole process tree every 50 ms while it runs: RSS (pages shared
between processes counted once per process), PSS (shared pages shared out), and RSS without
file-backed pages (``RssAnon + RssShmem``: what the processes hold apart from the page cache
of files they map, such as memory-mapped shards).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from _storage_bench import BENCH

ROOT = BENCH.parent
LOOPS = str(BENCH / "_streaming_loops.py")
# `import streaming` imports torchvision's VisionDataset; torchvision's wheel is a CUDA build
# that fails against CPU torch, so the peers' venv has none and gets this stand-in instead.
_STUB = {
    "torchvision/__init__.py": "",
    "torchvision/datasets.py": "class VisionDataset:\n    pass\n",
    "torchvision/transforms/__init__.py": "",
    "torchvision/transforms/functional.py": "def to_tensor(x):\n    raise NotImplementedError\n",
}


@dataclass(frozen=True)
class System:
    label: str
    peer: bool  # runs in .venv-bench
    data: str  # the dataset folder it reads


SYSTEMS = {
    "trainops": System(
        "trainops StreamingDataset (batches made by the dataset)", False, "trainops"
    ),
    "trainops_records": System(
        "trainops StreamingDataset, one record per item (DataLoader batches)", False, "trainops"
    ),
    "mosaicml": System("MosaicML streaming (MDS, py1e)", True, "mosaicml"),
    "litdata": System("LitData (chunks)", True, "litdata"),
    "webdataset": System("WebDataset (tars, buffer 1000)", True, "webdataset"),
    "files": System("DataLoader over one file per record", False, "files"),
}


def bench_python() -> str | None:
    """``.venv-bench``'s interpreter when it has the peers, else None."""
    python = ROOT / ".venv-bench" / "bin" / "python"
    if not python.is_file():
        return None
    check = "import litdata, streaming, webdataset"
    env = {**os.environ, "PYTHONPATH": str(_stub_dir())}
    done = subprocess.run([str(python), "-c", check], env=env, capture_output=True)
    return str(python) if done.returncode == 0 else None


def _stub_dir() -> Path:
    # Inside the peers' own (gitignored) venv: a fixed name in a shared /tmp could be planted.
    folder = ROOT / ".venv-bench" / "torchvision-stub"
    for name, text in _STUB.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


class Runner:
    """Writes the datasets once, then runs and measures epochs; ``samples`` keeps every run."""

    def __init__(self, args: argparse.Namespace, peer_python: str | None) -> None:
        self.args = args
        self.peer_python = peer_python
        self.systems = [n for n, s in SYSTEMS.items() if peer_python or not s.peer]
        self.missing = {
            n: ".venv-bench with the peers not found (recipe: streaming.md §13)"
            for n in SYSTEMS
            if n not in self.systems
        }
        self.samples: dict[str, list[dict[str, Any]]] = {n: [] for n in self.systems}

    def order(self, round_number: int) -> list[str]:
        turn = round_number % len(self.systems)
        names = self.systems[turn:] + self.systems[:turn]
        return names[::-1] if round_number % 2 else names

    def prepare(self) -> None:
        for data in dict.fromkeys(SYSTEMS[n].data for n in self.systems):
            folder = self.args.workdir / data
            if (folder / ".complete").exists():
                continue
            name = next(n for n in self.systems if SYSTEMS[n].data == data)
            shutil.rmtree(folder, ignore_errors=True)
            size = [str(self.args.records), str(self.args.per_shard)]
            self._child(name, ["write", name, str(folder), *size])
            (folder / ".complete").touch()

    def measure(self, name: str) -> None:
        _warm(self.args.workdir / SYSTEMS[name].data)
        output, peaks = self._child(name, self._read(name))
        run = json.loads(output.strip().splitlines()[-1])
        self.samples[name].append(run | peaks)
        print(f"{name}: {run['samples'] / run['batch_times_s'][-1]:,.0f} samples/s", flush=True)

    def ids_of(self, name: str) -> list[int]:
        ids_file = self.args.workdir / f"ids-{name}.bin"
        self._child(name, [*self._read(name), "--ids", str(ids_file)])
        found = array("Q")
        found.frombytes(ids_file.read_bytes())
        return list(found)

    def _read(self, name: str) -> list[str]:
        a = self.args
        folder = str(a.workdir / SYSTEMS[name].data)
        knobs = ["--batch", str(a.batch), "--workers", str(a.workers), "--seed", str(a.seed)]
        return ["read", name, folder, *knobs]

    def _child(self, name: str, argv: list[str]) -> tuple[str, dict[str, float]]:
        system = SYSTEMS[name]
        python = self.peer_python if system.peer else sys.executable
        paths = [str(ROOT / "src"), str(ROOT)] + ([str(_stub_dir())] if system.peer else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen([str(python), LOOPS, *argv], env=env, stdout=out, stderr=out)
            peaks = _watch(proc)
            out.seek(0)
            text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise SystemExit(f"{name} {argv[0]}: exit {proc.returncode}\n{text[-3000:]}")
        return text, peaks


def _watch(proc: subprocess.Popen[bytes]) -> dict[str, float]:
    rss = pss = anon = 0
    parent = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [parent, *parent.children(recursive=True)]
            infos = [p.memory_full_info() for p in tree]
            unfiled = sum(_unfiled_kib(p.pid) for p in tree) << 10
        except psutil.Error:  # a worker came or went between the listing and the reading
            infos, unfiled = [], 0
        rss = max(rss, sum(i.rss for i in infos))
        pss = max(pss, sum(i.pss for i in infos))
        anon = max(anon, unfiled)
        time.sleep(0.05)
    peaks = {"peak_rss_mib": rss, "peak_pss_mib": pss, "peak_unfiled_rss_mib": anon}
    return {name: round(value / 2**20, 1) for name, value in peaks.items()}


def _unfiled_kib(pid: int) -> int:
    """RssAnon + RssShmem: resident memory that is not a mapped file's page cache."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as error:
        raise psutil.NoSuchProcess(pid) from error
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    return sum(int(fields.get(name, "0 kB").split()[0]) for name in ("RssAnon", "RssShmem"))


def _warm(folder: Path) -> None:
    for entry in os.scandir(folder):
        if entry.is_file():
            with open(entry.path, "rb") as handle:
                while handle.read(1 << 20):
                    pass
