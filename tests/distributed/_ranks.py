"""Start N real processes of a worker script as the ranks of one gloo world, and read their
JSON results (what a launcher gives them: RANK, WORLD_SIZE, LOCAL_*, NODE_RANK, MASTER_*)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainops.profiler._bootstrap import BOOTSTRAP_DIR, YIELD_AT_EXIT_ENV


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(
    worker: Path,
    args: list[str],
    out_dir: Path,
    *,
    world: int,
    per_host: int,
    extra_env: dict[str, str] | None = None,
    timeout: float = 180,
) -> list[dict[str, Any]]:
    """Run ``worker args <out file>`` as ``world`` ranks, ``per_host`` to a host; every rank
    must exit 0; returns what each wrote to its out file."""
    port = free_port()
    outs = [out_dir / f"rank{rank}.json" for rank in range(world)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_", "LOCAL_"))}
    # As a job's processes of several start: with the bootstrap's pause at exit, without which
    # gloo may abort a rank that has done its work (see trainops/profiler/_bootstrap).
    path = [str(BOOTSTRAP_DIR), *filter(None, base.get("PYTHONPATH", "").split(os.pathsep))]
    base |= {"PYTHONPATH": os.pathsep.join(path), YIELD_AT_EXIT_ENV: "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), *args, str(out)],
            env={
                **base,
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(rank % per_host),
                "LOCAL_WORLD_SIZE": str(per_host),
                "NODE_RANK": str(rank // per_host),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "GLOO_SOCKET_IFNAME": "lo",
                "OMP_NUM_THREADS": "1",
                **(extra_env or {}),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank, out in enumerate(outs)
    ]
    try:
        logs = [p.communicate(timeout=timeout)[0].decode(errors="replace") for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * world, "\n".join(logs)
    return [json.loads(out.read_text()) for out in outs]
