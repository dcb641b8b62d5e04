"""The job bench/spot_recovery.py interrupts: fixed-length steps, a checkpoint every k of them.

Each step sleeps ``--step-seconds`` (work measured in wall time, so that the figures do not depend
on the machine's load) and prints ``step=N t=<epoch seconds>``. Every ``--checkpoint-every``
steps it writes ``ckpt-<step>.bin``: a header (step, SHA-256 of the payload) and a payload of
``--checkpoint-mb`` MB, under a temporary name, fsynced, renamed; it keeps the newest two. At
start it prints ``spot-bench start t=...`` before anything else, restores the newest checkpoint
whose payload matches its checksum (a torn one is reported and skipped), and prints
``spot-bench resumed step=S t=... restore_s=...``. SIGTERM keeps its default action: the job
dies at once, so that what the interruption loses is what the checkpoint interval leaves.
"""

import time

STARTED = time.time()

import argparse  # noqa: E402  (the start time first: it is what the benchmark measures)
import hashlib  # noqa: E402
import os  # noqa: E402
import struct  # noqa: E402
from pathlib import Path  # noqa: E402

HEADER = struct.Struct("<q32s")
MB = 1 << 20


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--checkpoint-mb", type=float, default=1.0)
    return parser.parse_args()


def newest(folder: Path) -> tuple[int, float]:
    """The newest intact checkpoint's step (0: none) and the seconds its read and check took."""
    began = time.perf_counter()
    found = sorted(folder.glob("ckpt-*.bin"), key=lambda p: int(p.stem.split("-")[1]))
    for path in reversed(found):
        data = path.read_bytes()
        if len(data) >= HEADER.size:
            step, digest = HEADER.unpack_from(data)
            if hashlib.sha256(data[HEADER.size :]).digest() == digest:
                return step, time.perf_counter() - began
        print(f"spot-bench torn checkpoint {path.name} skipped", flush=True)
    return 0, time.perf_counter() - began


def save(folder: Path, step: int, payload: bytes) -> None:
    final = folder / f"ckpt-{step:06d}.bin"
    tmp = folder / f".{final.name}.tmp"
    with tmp.open("wb") as handle:
        handle.write(HEADER.pack(step, hashlib.sha256(payload).digest()))
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, final)
    for old in sorted(folder.glob("ckpt-*.bin"))[:-2]:
        old.unlink(missing_ok=True)


def main() -> None:
    print(f"spot-bench start t={STARTED:.6f}", flush=True)
    args = parse_args()
    folder = Path(os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints"))
    folder.mkdir(parents=True, exist_ok=True)
    restored, restore_s = newest(folder)
    now = time.time()
    print(f"spot-bench resumed step={restored} t={now:.6f} restore_s={restore_s:.6f}", flush=True)
    payload = os.urandom(int(args.checkpoint_mb * MB))
    for step in range(restored + 1, args.steps + 1):
        time.sleep(args.step_seconds)
        print(f"step={step} t={time.time():.6f}", flush=True)
        if step % args.checkpoint_every == 0:
            save(folder, step, payload)
            print(f"checkpoint step={step} t={time.time():.6f}", flush=True)


if __name__ == "__main__":
    main()
