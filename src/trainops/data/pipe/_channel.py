"""A Pipe-mode channel seen from the training script: its config, its FIFOs, its epoch counter.

SageMaker's contract (reference: sagemaker-tensorflow-extensions' PipeModeDataset): the channel
is listed in ``inputdataconfig.json`` with ``TrainingInputMode`` ``Pipe``; epoch ``k`` is read
from the FIFO ``<pipe_dir>/<channel>_<k>``, where ``pipe_dir`` is the parent of
``$SM_CHANNEL_<NAME>``. Which epoch comes next is kept in a small state file under
``<job root>/pipe_state`` (the reference's ``/opt/ml/pipe_state``), taken under ``flock``, so
several datasets or processes (one DataLoader worker per epoch) never open the same FIFO twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trainops._errors import TrainopsError

__all__ = ["PipeChannel", "PipeChannelError", "channel_entry", "input_config", "pipe_root"]

_NAME = re.compile(r"[A-Za-z0-9.\-_]{1,64}")
_MAX_CONFIG_BYTES = 1 << 20
_MAX_STATE_BYTES = 32
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class PipeChannelError(TrainopsError):
    """A Pipe channel cannot be read: not configured, not Pipe mode, or its FIFO never came."""


def input_config(config_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``inputdataconfig.json`` of this job (``$SM_INPUT_CONFIG_DIR`` or /opt/ml/input/config)."""
    folder = Path(config_dir or os.environ.get("SM_INPUT_CONFIG_DIR") or "/opt/ml/input/config")
    path = folder / "inputdataconfig.json"
    try:
        with open(path, "rb") as handle:
            text = handle.read(_MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise PipeChannelError(f"{path}: cannot read: {error.strerror}") from None
    if len(text) > _MAX_CONFIG_BYTES:
        raise PipeChannelError(f"{path}: larger than {_MAX_CONFIG_BYTES} bytes")
    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise PipeChannelError(f"{path}: not JSON: {error}") from None
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        raise PipeChannelError(f"{path}: expected an object of channels, each an object")
    return config


def pipe_root(name: str, env: Mapping[str, str] | None = None) -> Path:
    """Where the channel's FIFOs are: the parent of ``$SM_CHANNEL_<NAME>``, else
    ``$SM_INPUT_DIR/data``, else /opt/ml/input/data."""
    env = os.environ if env is None else env
    channel_dir = env.get(f"SM_CHANNEL_{name.upper()}")
    if channel_dir:
        return Path(channel_dir).parent
    return Path(env.get("SM_INPUT_DIR") or "/opt/ml/input") / "data"


@dataclass(frozen=True, slots=True)
class PipeChannel:
    """Channel ``name`` in Pipe mode; ``wrapped`` when its objects come as RecordIO records."""

    name: str
    pipe_dir: Path
    state_dir: Path
    wrapped: bool = False
    timeout: float = 120.0

    @classmethod
    def find(
        cls,
        name: str,
        *,
        pipe_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        config_dir: str | os.PathLike[str] | None = None,
        timeout: float = 120.0,
    ) -> PipeChannel:
        """The channel as ``inputdataconfig.json`` describes it; refused unless in Pipe mode."""
        if not _NAME.fullmatch(name):
            raise PipeChannelError(f"{name!r} is not a channel name ([A-Za-z0-9.-_], 1-64)")
        entry = channel_entry(name, config_dir)
        mode = str(entry.get("TrainingInputMode", "File"))
        if mode.lower() != "pipe":
            raise PipeChannelError(
                f"channel {name!r} is in {mode} mode (inputdataconfig.json), not Pipe: "
                f"read its files under $SM_CHANNEL_{name.upper()}"
            )
        pipes = Path(pipe_dir) if pipe_dir else pipe_root(name)
        states = Path(state_dir) if state_dir else pipes.parent.parent / "pipe_state"
        wrapped = str(entry.get("RecordWrapperType", "None")).lower() == "recordio"
        return cls(name, pipes, states, wrapped, timeout)

    def label(self, epoch: int) -> str:
        return f"channel {self.name}, epoch {epoch}"

    def fifo(self, epoch: int) -> Path:
        return self.pipe_dir / f"{self.name}_{epoch}"

    def claim(self) -> int:
        """The next epoch to read (0 first), counted once per call across processes."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state = self.state_dir / f".{self.name}-pipe_mode-state"
        with _locked(self.state_dir / f".{self.name}-pipe_mode-lock"):
            epoch = _read_state(state)
            tmp = state.with_name(f"{state.name}.{os.getpid()}.tmp")
            tmp.write_text(str(epoch + 1), encoding="ascii")
            os.replace(tmp, state)
        return epoch

    def open(self, epoch: int) -> BinaryIO:
        """Epoch ``epoch``'s FIFO, once it exists and its writer has sent something (or ended)."""
        deadline = time.monotonic() + self.timeout
        path = self.fifo(epoch)
        _wait_for(path, deadline, f"{self.label(epoch)}: {path}", self.timeout)
        try:
            fd = os.open(path, _OPEN)
        except OSError as error:
            raise PipeChannelError(f"{self.label(epoch)}: cannot open {path}: {error}") from None
        try:
            kind = os.fstat(fd).st_mode
            if stat.S_ISFIFO(kind):
                _wait_readable(fd, deadline, self.label(epoch), self.timeout)
            elif not stat.S_ISREG(kind):
                raise PipeChannelError(f"{self.label(epoch)}: {path} is not a FIFO or a file")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise


def channel_entry(name: str, config_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    config = input_config(config_dir)
    if name not in config:
        known = ", ".join(sorted(config)) or "none"
        raise PipeChannelError(f"no channel {name!r} in inputdataconfig.json (channels: {known})")
    entry: dict[str, Any] = config[name]
    return entry


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_state(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    with open(fd, "rb") as handle:
        text = handle.read(_MAX_STATE_BYTES + 1)
    if not text.strip().isdigit() or len(text) > _MAX_STATE_BYTES:
        raise PipeChannelError(f"{path}: not an epoch number: {text[:_MAX_STATE_BYTES]!r}")
    return int(text)


def _wait_for(path: Path, deadline: float, label: str, timeout: float) -> None:
    delay = 0.001
    while not os.path.lexists(path):
        left = deadline - time.monotonic()
        if left <= 0:
            raise PipeChannelError(f"{label} did not appear within {timeout:g} s (timeout)")
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)


def _wait_readable(fd: int, deadline: float, label: str, timeout: float) -> None:
    # Opened without blocking, a FIFO reads as empty until a writer comes; poll says when it
    # has data, or has hung up (an empty epoch), so neither is mistaken for the other.
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    left = max(0.0, deadline - time.monotonic())
    if not poller.poll(left * 1000):
        raise PipeChannelError(
            f"{label}: no writer sent anything to the FIFO within {timeout:g} s (timeout)"
        )
