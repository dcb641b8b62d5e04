"""Topology-aware allreduce: two emulated hosts joined by a slow link, four gloo ranks.

Two network namespaces are the two hosts; a veth pair shaped with ``tbf`` (``--rate``, default
100 Mbit/s; this kernel has no ``netem``) is the link between them; traffic between ranks of
one namespace stays on its loopback (fast). Two ranks per namespace, one gloo process group.
Three ways of summing a tensor, interleaved rep by rep (the order rotates every round):

- flat, grouped: ``all_reduce`` on the world, ranks 0,1 on host A and 2,3 on host B (the ring
  crosses the slow link twice per lap, each host's link carries one flow)
- flat, interleaved: ``all_reduce`` on a group ordered 0,2,1,3 (A,B,A,B: every hop of the ring
  crosses the link, each host's link carries two flows)
- hierarchical: trainops' topology-aware reduction (``trainops.distributed.hierarchical_all_reduce``,
  the collectives of its DDP hook): reduce inside the host, allreduce between the two leaders,
  broadcast inside the host

for 1, 16 and 64 MiB (median of ``--rounds``, default 5, after one warm-up), next to the
alpha-beta model's bandwidth term (p = 4 ranks, N = 2 hosts, B the link rate):
flat grouped 2(p-1)/p n/B, interleaved twice that, hierarchical 2(1-1/N) n/B. Targets:
hierarchical at least 1.3x faster than flat grouped and 2.5x faster than interleaved, every
path within 15 % of the model at 16 and 64 MiB. ``--step`` also times a DDP training step of
the digits example's CNN with and without the hook over the same link.

Needs root (``ip netns``, ``tc``); creates and removes its own namespaces and veth pair and
uses no address outside them (10.77.0.0/24 lives only inside the two namespaces).

    sudo python bench/allreduce_topology.py [--rounds 5] [--sizes 1,16,64] [--rate 100mbit]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _report import machine, update_section, versions  # noqa: E402

SECTION = "allreduce_topology"
MODES = ("flat_grouped", "flat_interleaved", "hierarchical")
LABELS = {
    "flat_grouped": "flat ring, ranks grouped by host",
    "flat_interleaved": "flat ring, ranks interleaved across hosts",
    "hierarchical": "trainops hierarchical (host, leaders, host)",
}
HOSTS, PER_HOST = 2, 2
WORLD = HOSTS * PER_HOST
ADDRESSES = ("10.77.0.1", "10.77.0.2")
TARGET_VS_GROUPED, TARGET_VS_INTERLEAVED, MODEL_TOLERANCE = 1.3, 2.5, 0.15
MIB = 1 << 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1,16,64", help="MiB, comma-separated")
    parser.add_argument("--rate", default="100mbit", help="tbf rate of the link between hosts")
    parser.add_argument("--step", action="store_true", help="also time a DDP step of the CNN")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "allreduce_topology.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size_list = [float(s) for s in args.sizes.split(",") if s]
    return args


# The emulated cluster -------------------------------------------------------------------------


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


@contextmanager
def two_hosts(rate: str) -> Iterator[tuple[str, str, str, str]]:
    """Two namespaces joined by a shaped veth pair; yields (nsA, nsB, ifA, ifB)."""
    tag = str(os.getpid())
    ns_a, ns_b, if_a, if_b = f"tops{tag}a", f"tops{tag}b", f"tva{tag}"[:15], f"tvb{tag}"[:15]
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        _ip("link", "add", if_a, "type", "veth", "peer", "name", if_b)
        for ns, ifname, address in ((ns_a, if_a, ADDRESSES[0]), (ns_b, if_b, ADDRESSES[1])):
            _ip("link", "set", ifname, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", ifname)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", ifname, "up")
            subprocess.run(
                ["tc", "-n", ns, "qdisc", "add", "dev", ifname, "root", "tbf", "rate", rate,
                 "burst", "256kb", "latency", "200ms"],
                check=True, capture_output=True,
            )  # fmt: skip
        yield ns_a, ns_b, if_a, if_b
    finally:
        for ns in (ns_a, ns_b):  # removing a namespace removes its end of the veth pair
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


def run_workers(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    with two_hosts(args.rate) as (ns_a, ns_b, if_a, if_b):
        procs = []
        for rank in range(WORLD):
            node = rank // PER_HOST
            ns, ifname = (ns_a, if_a) if node == 0 else (ns_b, if_b)
            env = {
                **os.environ,
                "RANK": str(rank),
                "WORLD_SIZE": str(WORLD),
                "LOCAL_RANK": str(rank % PER_HOST),
                "LOCAL_WORLD_SIZE": str(PER_HOST),
                "NODE_RANK": str(node),
                "MASTER_ADDR": ADDRESSES[0],
                "MASTER_PORT": "29611",
                "GLOO_SOCKET_IFNAME": ifname,
                "OMP_NUM_THREADS": "1",
            }
            argv = [sys.executable, __file__, "--worker", str(scratch / f"rank{rank}.json"),
                    "--rounds", str(args.rounds), "--sizes", args.sizes,
                    "--steps", str(args.steps)] + (["--step"] if args.step else [])  # fmt: skip
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env))
        codes = [p.wait(timeout=3600) for p in procs]
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")
    return json.loads((scratch / "rank0.json").read_text())


# One rank -------------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from trainops.distributed import HierarchicalState, hierarchical_all_reduce, init_process_group

    torch.set_num_threads(1)
    world = init_process_group("gloo", timeout_s=1800)
    state = HierarchicalState.build(world)
    interleaved = dist.new_group([0, 2, 1, 3], sort_ranks=False)

    def reduce(mode: str, tensor: torch.Tensor) -> None:
        if mode == "flat_grouped":
            dist.all_reduce(tensor)
        elif mode == "flat_interleaved":
            dist.all_reduce(tensor, group=interleaved)
        else:
            hierarchical_all_reduce(tensor, state)

    samples: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    for round_ in range(args.rounds + 1):  # round 0 warms up
        order = MODES[round_ % 3 :] + MODES[: round_ % 3]
        for size in args.size_list:
            for mode in order:
                tensor = torch.full((int(size * MIB) // 4,), float(world.rank + 1))
                dist.barrier()
                start = time.perf_counter()
                reduce(mode, tensor)
                elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                if not bool((tensor == float(sum(range(1, WORLD + 1)))).all()):
                    raise SystemExit(f"{mode}: wrong sum")
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
                if round_:
                    samples[mode].setdefault(f"{size:g}", []).append(float(elapsed))
    result: dict[str, Any] = {"samples": samples}
    if args.step:
        result["step"] = _step_times(args.steps, world)
    if world.rank == 0:
        args.worker.write_text(json.dumps(result))
    dist.barrier()  # leave together: gloo aborts a rank whose peers are gone
    dist.destroy_process_group()


def _step_times(steps: int, world: Any) -> dict[str, list[float]]:
    """Seconds per DDP training step of the digits example's CNN, without and with the hook."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, str(BENCH.parent / "examples" / "digits" / "src"))
    from train import build_model  # the example's own model

    from trainops.distributed import enable_topology_aware

    times: dict[str, list[float]] = {"ddp": [], "ddp_hierarchical": []}
    generator = torch.Generator().manual_seed(world.rank)
    images = torch.randn(64, 1, 8, 8, generator=generator)
    labels = torch.randint(0, 10, (64,), generator=generator)
    for step in range(2 * steps):
        name = "ddp" if step % 2 == 0 else "ddp_hierarchical"  # interleaved step by step
        torch.manual_seed(0)
        model = DistributedDataParallel(build_model())
        if name == "ddp_hierarchical":
            enable_topology_aware(model, world)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        torch.distributed.barrier()
        start = time.perf_counter()
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
        times[name].append((time.perf_counter() - start) / 3)
    return times


# Figures --------------------------------------------------------------------------------------


def model_seconds(mode: str, size_mib: float, rate_bits: float) -> float:
    transfer = size_mib * MIB * 8 / rate_bits
    flat = 2 * (WORLD - 1) / WORLD * transfer
    return {"flat_grouped": flat, "flat_interleaved": PER_HOST * flat}.get(
        mode, 2 * (1 - 1 / HOSTS) * transfer
    )


def rate_bits(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * factor
    raise SystemExit(f"--rate {rate!r}: use e.g. 100mbit or 1gbit")


def summarize(raw: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    bits = rate_bits(args.rate)
    sizes: dict[str, Any] = {}
    for size in args.size_list:
        key = f"{size:g}"
        medians = {m: statistics.median(raw["samples"][m][key]) for m in MODES}
        models = {m: model_seconds(m, size, bits) for m in MODES}
        sizes[key] = {
            "median_s": medians,
            "model_s": models,
            "measured_over_model": {m: medians[m] / models[m] for m in MODES},
            "hierarchical_speedup_vs_grouped": medians["flat_grouped"] / medians["hierarchical"],
            "hierarchical_speedup_vs_interleaved": (
                medians["flat_interleaved"] / medians["hierarchical"]
            ),
        }
    result: dict[str, Any] = {
        "benchmark": SECTION,
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "settings": {"rounds": args.rounds, "rate": args.rate, "ranks": WORLD, "hosts": HOSTS},
        "sizes": sizes,
        "raw": raw,
    }
    if "step" in raw:
        result["step_ms"] = {k: 1000 * statistics.median(v) for k, v in raw["step"].items()}
    return result


def render(result: dict[str, Any]) -> str:
    rows = [
        "| size | " + " | ".join(LABELS[m] for m in MODES) + " | hier speed-up vs grouped "
        f"(≥ {TARGET_VS_GROUPED}) | vs interleaved (≥ {TARGET_VS_INTERLEAVED}) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for key, figures in result["sizes"].items():
        cells = [
            f"{figures['median_s'][m]:.3f} s (model {figures['model_s'][m]:.3f}, "
            f"{figures['measured_over_model'][m]:.2f}x)"
            for m in MODES
        ]
        rows.append(
            f"| {key} MiB | " + " | ".join(cells)
            + f" | {figures['hierarchical_speedup_vs_grouped']:.2f}x"
            + f" | {figures['hierarchical_speedup_vs_interleaved']:.2f}x |"
        )  # fmt: skip
    settings = result["settings"]
    note = (
        f"\nMeasured {result['measured_at']}: {settings['ranks']} gloo ranks on "
        f"{settings['hosts']} namespaces joined by a veth pair shaped to {settings['rate']} "
        f"(tbf), median of {settings['rounds']} interleaved rounds after a warm-up; model = "
        "alpha-beta bandwidth term. torch "
        f"{result['versions'].get('torch')}. Raw: [results/allreduce_topology.json]"
        "(results/allreduce_topology.json)."
    )
    if "step_ms" in result:
        step = result["step_ms"]
        note += (
            f" DDP step of the digits CNN over the same link: {step['ddp']:.1f} ms default, "
            f"{step['ddp_hierarchical']:.1f} ms with the hook."
        )
    return "\n".join(rows) + "\n" + note


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args)
        return
    if os.geteuid() != 0:
        raise SystemExit("needs root: it creates network namespaces and shapes a veth pair")
    with tempfile.TemporaryDirectory(prefix="allreduce-") as scratch:
        raw = run_workers(args, Path(scratch))
    result = summarize(raw, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = render(result)
    update_section(args.readme, SECTION, table)
    print(table)


if __name__ == "__main__":
    main()
