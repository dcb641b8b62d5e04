"""Streaming dataset: samples/s for 4 KiB records, shuffle on, 2 workers, against the peers.

The same ``--records`` x 4 KiB records (``--per-shard`` to a shard) are written in each system's
format: trainops shards, MosaicML MDS, LitData chunks, WebDataset tars, and one file per record
for a plain DataLoader. Each system then reads one epoch with shuffling on, ``--workers``
DataLoader workers and batches of ``--batch``, identity collate (a list of the samples, no
decode), its loop touching every sample, in a child process of its own interpreter (the peers
run in ``.venv-bench``: MosaicML streaming pins numpy<2.2; the recipe is in streaming.md §13;
torch is the same release in both). ``trainops_records`` is trainops handing the DataLoader one
record per item, batched by the DataLoader in the worker (a fetch and a collate per record, the
batch pickled as bytes): what making the batches in the dataset and sending them through shared
memory saves.

Per run: steady-state samples/s (the first 5 % of batches left out), time to first batch from
the dataset's constructor (imports done), peak RSS and PSS summed over the process tree, and
the same without file-backed pages (``RssAnon + RssShmem``: memory-mapped shards are page cache,
not memory the loader holds), sampled every 50 ms by this process. Page cache warm: each
system's files are read once before each of its runs. Systems are interleaved, their order turned over every round; the
figures are medians over ``--rounds``. One more epoch per system logs the sample ids for the
shuffle quality (``_streaming_quality``), not timed. Targets: trainops ≥ 2x the best peer's
samples/s, time to first batch ≤ 0.5 s. The machine may be shared with other work: see
``machine`` and the load average in the JSON.

    python bench/streaming.py [--records 131072] [--per-shard 16384] [--rounds 3]
                              [--workdir DIR (kept, reused)]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _storage_bench import BENCH, header, publish
from _streaming_quality import quality, references
from _streaming_runs import SYSTEMS, Runner, bench_python

SECTION = "streaming"
PEERS = ("mosaicml", "litdata", "webdataset", "files")
TARGET_RATIO, TARGET_TTFB_S = 2.0, 0.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=131072)
    parser.add_argument("--per-shard", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.records < args.batch:
        parser.error("need --rounds >= 1 and --records >= --batch")
    return args


def steady_rate(run: dict[str, Any]) -> float:
    """Samples/s after the first 5 % of batches."""
    times = run["batch_times_s"]
    skip = max(1, len(times) // 20)
    if len(times) <= skip:
        return float(run["samples"] / times[-1])
    per_batch = run["samples"] / len(times)
    return float((len(times) - skip) * per_batch / (times[-1] - times[skip - 1]))


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [steady_rate(s) for s in samples]
    return {
        "samples_per_s": round(statistics.median(rates)),
        "samples_per_s_min": round(min(rates)),
        "samples_per_s_max": round(max(rates)),
        "mb_per_s": round(statistics.median(rates) * 4096 / 1e6, 1),
        "ttfb_s": round(statistics.median(s["ttfb_s"] for s in samples), 3),
        "peak_rss_mib": round(statistics.median(s["peak_rss_mib"] for s in samples)),
        "peak_pss_mib": round(statistics.median(s["peak_pss_mib"] for s in samples)),
        "peak_unfiled_rss_mib": round(
            statistics.median(s["peak_unfiled_rss_mib"] for s in samples)
        ),
    }


def build_result(
    runner: Runner, args: argparse.Namespace, ids: dict[str, list[int]]
) -> dict[str, Any]:
    summary = {name: summarise(runs) for name, runs in runner.samples.items() if runs}
    peers = {name: summary[name]["samples_per_s"] for name in PEERS if name in summary}
    best = max(peers, key=lambda name: peers[name]) if peers else None
    ours = summary.get("trainops", {})
    ratio = ours["samples_per_s"] / peers[best] if best and ours else None
    result = header("streaming", vars(args) | {"workdir": str(args.workdir)})
    result["load_average"] = os.getloadavg()
    result |= {
        "systems": {name: SYSTEMS[name].label for name in summary},
        "summary": summary,
        "best_peer": best,
        "ratio_over_best_peer": None if ratio is None else round(ratio, 2),
        "targets": {"ratio_over_best_peer": TARGET_RATIO, "ttfb_s": TARGET_TTFB_S},
        "targets_met": {
            "ratio": None if ratio is None else ratio >= TARGET_RATIO,
            "ttfb": ours.get("ttfb_s", 99) <= TARGET_TTFB_S if ours else None,
        },
        "shuffle_quality": {name: quality(order, args.per_shard) for name, order in ids.items()},
        "shuffle_reference": references(args.records, args.per_shard, args.seed),
        "trainops_shuffle_window": "default: 1 GiB of records, at most 262,144",
        "runs": runner.samples,
        "not_measured": runner.missing,
    }
    return result


def render_table(result: dict[str, Any]) -> str:
    summary, quality_of = result["summary"], result["shuffle_quality"]
    rows = [
        "| system | samples/s (min-max) | MB/s | first batch (s) | peak RSS / PSS / without "
        "file pages (MiB) | entropy ids / shards | mean shard run | KS mean |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summary.items():
        q = quality_of.get(name, {})
        rows.append(
            f"| {result['systems'][name]} | {s['samples_per_s']:,} ({s['samples_per_s_min']:,}"
            f"-{s['samples_per_s_max']:,}) | {s['mb_per_s']} | {s['ttfb_s']} "
            f"| {s['peak_rss_mib']} / {s['peak_pss_mib']} / {s['peak_unfiled_rss_mib']} "
            f"| {q.get('entropy_ids', '')} / {q.get('entropy_shards', '')} "
            f"| {q.get('mean_shard_run', '')} | {q.get('ks_mean', '')} |"
        )
    for name, q in result["shuffle_reference"].items():
        rows.append(
            f"| (reference: {name.replace('_', ' ')}) | | | | | {q['entropy_ids']} / "
            f"{q['entropy_shards']} | {q['mean_shard_run']} | {q['ks_mean']} |"
        )
    return "\n".join([*rows, "", _verdict(result)])


def _verdict(result: dict[str, Any]) -> str:
    args, met = result["args"], result["targets_met"]
    m = result["machine"]
    ratio = result["ratio_over_best_peer"]
    best = result["best_peer"]
    return (
        f"trainops / best peer ({best}): **{ratio}x** (target ≥ {TARGET_RATIO}x: "
        f"{'met' if met['ratio'] else 'not met'}); trainops first batch "
        f"{result['summary'].get('trainops', {}).get('ttfb_s')} s (target ≤ {TARGET_TTFB_S} s: "
        f"{'met' if met['ttfb'] else 'not met'}). {args['records']:,} records of 4 KiB, "
        f"{args['per_shard']:,} to a shard, batches of {args['batch']}, {args['workers']} "
        f"workers, page cache warm; trainops shuffle window by default (1 GiB of records, at "
        f"most 262,144), WebDataset buffer 1,000, MosaicML py1e defaults, LitData chunk + "
        f"intra-chunk. Median of {args['rounds']} interleaved rounds on {m['cpu_model']}, "
        f"{m['usable_cores']} cores, shared with other work (load average at the end "
        f"{result['load_average'][0]:.1f}). Raw samples: "
        "[results/streaming.json](results/streaming.json)."
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    owned = args.workdir is None
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="trainops-bench-streaming-"))
    try:
        runner = Runner(args, bench_python())
        runner.prepare()
        for round_number in range(args.rounds):
            for name in runner.order(round_number):
                runner.measure(name)
        ids = {name: runner.ids_of(name) for name in runner.systems}
        result = build_result(runner, args, ids)
    finally:
        if owned:
            shutil.rmtree(args.workdir, ignore_errors=True)
    publish(result, BENCH / "results" / "streaming.json", BENCH / "README.md", SECTION,
            render_table(result))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
