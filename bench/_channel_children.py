"""The processes bench/channels.py measures, one role per run: ``python _channel_children.py ROLE
JSON``. Each prints one JSON line; times are ``time.monotonic()`` (CLOCK_MONOTONIC, one clock
for every process on the machine), so a host's start and its reader's first byte compare.

- ``reader``: a training script's side. Pipe: waits for ``<name>_<epoch>`` and reads it to EOF,
  epoch after epoch, in 1 MiB reads (optionally slowed to a rate, optionally stopping early).
  File/FastFile: waits for the host's ``.ready`` marker, then reads every file of the channel
  directory in key order. Records first byte, EOF and bytes per epoch. FastFile: first takes a
  namespace of its own with the channel's mounts (``.mounts``, the arguments the agent gives
  ``trainops._hostns_exec``), as a process of the job does before the script runs.
- ``host``: the agent's side. Opens the channel with the agent's own code (``open_channel``),
  starts a reader, marks the start, prepares (File: writes ``.ready`` once the download is done)
  and closes the channel once the reader has ended.
- ``fifo_ceiling``: the bare FIFO: a Python writer repeating one 1 MiB buffer into a FIFO with a
  1 MiB pipe, one FIFO per epoch (the next created just before the current closes), to a reader.
- ``s3_ceiling``: a plain parallel GET of objects (8 MiB ranged GETs, 16 at once, bytes dropped).
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src")]
CHUNK = 1 << 20


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_for(path: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.0005)


def read_stream(fd: int, args: dict[str, Any], epoch: dict[str, Any]) -> None:
    rate = args.get("slow_bytes_per_s")
    limit = args.get("stop_after_bytes")
    start = time.monotonic()
    while chunk := os.read(fd, CHUNK):
        if epoch["bytes"] == 0:
            epoch["first_byte"] = time.monotonic()
        epoch["bytes"] += len(chunk)
        if rate:  # a reader slower than storage: sleep to its pace
            time.sleep(max(0.0, start + epoch["bytes"] / rate - time.monotonic()))
        if limit and epoch["bytes"] >= limit:
            break
    epoch["eof"] = time.monotonic()


def reader(args: dict[str, Any]) -> dict[str, Any]:
    data, name = Path(args["dir"]), args["name"]
    epochs: list[dict[str, Any]] = []
    print("ready", flush=True)  # started (interpreter and imports): the host's clock may start
    for index in range(args["epochs"]):
        epoch: dict[str, Any] = {"bytes": 0, "first_byte": None}
        if args["kind"] == "pipe":
            path = data / f"{name}_{index}"
            wait_for(path)
            epoch["opened"] = time.monotonic()
            fd = os.open(path, os.O_RDONLY)
            read_stream(fd, args, epoch)
            os.close(fd)
        else:
            wait_for(data / ".ready")
            if args["kind"] == "fastfile" and index == 0:
                enter_job_namespace(json.loads((data / ".mounts").read_text()))
            epoch["opened"] = time.monotonic()
            for path in sorted(p for p in (data / name).rglob("*") if p.is_file()):
                fd = os.open(path, os.O_RDONLY)
                read_stream(fd, args, epoch)
                os.close(fd)
                if args.get("stop_after_bytes") and epoch["bytes"] >= args["stop_after_bytes"]:
                    break
            epoch["eof"] = time.monotonic()
        epochs.append(epoch)
    return {"epochs": epochs, "cpu_s": cpu_s()}


def enter_job_namespace(mounts: list[str]) -> None:
    """What ``python -m trainops._hostns_exec <mounts>`` does before it execs a job's process."""
    from trainops import _hostns_exec

    parsed = _hostns_exec._parser().parse_args(mounts)
    _hostns_exec._enter(None, None)
    _hostns_exec._mount_all(parsed)


def start_reader(args: dict[str, Any]) -> subprocess.Popen[str]:
    argv = [sys.executable, __file__, "reader", json.dumps(args)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"reader failed: exit {proc.returncode}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def host(args: dict[str, Any]) -> dict[str, Any]:
    from trainops._settings import Settings
    from trainops.agent.channels import ChannelContext, PipeChannel, open_channel
    from trainops.protocol import ChannelSpec
    from trainops.storage import store_for

    settings = Settings.load()
    data, scratch = Path(args["dir"]), Path(args["scratch"])
    data.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    stores: dict[str, Any] = {}

    def store(uri: str) -> Any:
        scheme = uri.partition("://")[0]
        return stores.setdefault(scheme, store_for(uri, settings))

    context = ChannelContext(
        data, scratch, ["algo-1"], "algo-1", store, settings, lambda _l: None, lambda: False
    )
    spec = ChannelSpec.from_json(
        "train", {**CHANNEL_DEFAULTS, "uri": args["uri"], "mode": args["mode"]}
    )
    for name, value in args.get("patch", {}).items():  # a setting under test (bench/fastfile.py)
        module, attribute = name.rsplit(".", 1)
        setattr(sys.modules[module], attribute, tuple(value))
    source = open_channel(spec, context)
    reading = start_reader({**args["reader"], "dir": str(data), "name": "train"})
    cpu0, start = cpu_s(), time.monotonic()
    source.prepare()
    prepared = time.monotonic()
    if args["mode"] == "FastFile":
        from trainops.agent.supervision._hostns import mount_arguments

        (data / ".mounts").write_text(json.dumps(mount_arguments(source.binds())))
    if args["mode"] != "Pipe":
        (data / ".ready").touch()
    result = finish(reading)
    helper = helper_usage(source)
    pipe = isinstance(source, PipeChannel)
    return {
        "start": start,
        "prepared": prepared,
        "reader": result,
        "host_cpu_s": cpu_s() - cpu0 + helper["cpu_s"],
        "helper_peak_rss_mib": helper["peak_rss_mib"],
        "peak_read_ahead": source.peak_read_ahead if pipe else 0,
        "read_ahead_budget": source.read_ahead_budget if pipe else 0,
    }


def helper_usage(source: Any) -> dict[str, float]:
    """Close ``source``; the CPU and peak RSS of the process it ran beside the agent (FastFile's
    rclone: its own process, reaped by ``close()``), so that the host's figures include it."""
    pid = getattr(source, "rclone_pid", None)
    peak = 0.0
    if pid is not None:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    source.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"cpu_s": spent if pid is not None else 0.0, "peak_rss_mib": peak}


CHANNEL_DEFAULTS = {
    "content_type": None,
    "distribution": "FullyReplicated",
    "shuffle_seed": None,
    "file_system": None,
    "compression": "None",
    "record_wrapping": "None",
    "s3_data_type": "S3Prefix",
    "attribute_names": [],
}


def fifo_ceiling(args: dict[str, Any]) -> dict[str, Any]:
    data = Path(args["dir"])
    data.mkdir(parents=True, exist_ok=True)
    reading = start_reader(
        {"kind": "pipe", "dir": str(data), "name": "bare", "epochs": args["epochs"]}
    )
    block = os.urandom(CHUNK)
    os.mkfifo(data / "bare_0")
    cpu0 = cpu_s()
    for epoch in range(args["epochs"]):
        fd = os.open(data / f"bare_{epoch}", os.O_WRONLY)
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, CHUNK)
        left = args["bytes_per_epoch"]
        while left > 0:
            view = memoryview(block)[: min(CHUNK, left)]
            while view:
                view = view[os.write(fd, view) :]
            left -= min(CHUNK, left)
        os.mkfifo(data / f"bare_{epoch + 1}")  # as ours: the next exists before the EOF
        os.close(fd)
        os.unlink(data / f"bare_{epoch}")
    result = finish(reading)
    os.unlink(data / f"bare_{args['epochs']}")
    return {"reader": result, "writer_cpu_s": cpu_s() - cpu0}


def s3_ceiling(args: dict[str, Any]) -> dict[str, Any]:
    from trainops._settings import Settings
    from trainops.storage import store_for

    store = store_for(args["uri"], Settings.load())
    objects = store.list_objects(args["uri"])
    spans = [
        (o.uri, at, min(at + 8 * CHUNK, o.size))
        for o in objects
        for at in range(0, o.size, 8 * CHUNK)
    ]
    cpu0, start = cpu_s(), time.monotonic()
    total = 0
    with ThreadPoolExecutor(16) as pool:
        for _ in range(args.get("passes", 1)):
            total += sum(pool.map(lambda span: len(store.get_range(*span)), spans))
    return {"bytes": total, "seconds": time.monotonic() - start, "cpu_s": cpu_s() - cpu0}


ROLES = {"reader": reader, "host": host, "fifo_ceiling": fifo_ceiling, "s3_ceiling": s3_ceiling}

if __name__ == "__main__":
    role, raw = sys.argv[1], sys.argv[2]
    print(json.dumps(ROLES[role](json.loads(raw))), flush=True)
