"""``Trial``: the saved tensors of one job, read while it runs or after, as smdebug's trial.

A refresh lists the index files it has not seen yet, loads each (bounded), and files its
tensors by global step, mode and worker. A step is complete once every worker (the collections
file's ``num_workers``) wrote it, once a later step is complete, or once the job has ended.
When ``training_job_end.ts`` appears the trial waits ``end_delay`` seconds, loads what is left,
and from then on :attr:`Trial.loaded_all_steps` is true (waiting for a step raises
``NoMoreData``). A file that is corrupt, too large or out of the layout is left out and named in
:attr:`Trial.errors` (a job's files must not stop its trial); reading a value from a corrupt event
file raises :class:`~trainops.debugger.DebugFormatError` naming the file and the record's byte
(``<file>: record at byte 89: field of 70 bytes runs past the message's end``). Refreshes happen
on each query unless :func:`no_refresh` holds them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from trainops._protowire import WireError
from trainops.debugger.config import Collection, CollectionManager
from trainops.debugger.exceptions import (
    DebugFormatError,
    MissingCollectionFiles,
    NoMoreData,
    StepUnavailable,
    TensorUnavailable,
)
from trainops.debugger.format import (
    COLLECTIONS_DIR,
    END_MARKER,
    INDEX_DIR,
    IndexLimits,
    StepIndex,
    StepKey,
    TensorLimits,
    decode_tensor_event,
    parse_index,
    parse_index_key,
    read_record,
    reverse_reduction_tensor_name,
)
from trainops.debugger.modes import ModeKeys, parse_mode
from trainops.debugger.trial._records import RecordReader
from trainops.debugger.trial._source import TrialSource
from trainops.debugger.trial._state import StepState
from trainops.debugger.trial._steps import StepBook
from trainops.debugger.trial._tensor import Location, Tensor

__all__ = ["Trial", "TrialLimits", "no_refresh", "refresh"]

_log = logging.getLogger("trainops.debugger")
_MAX_ERRORS = 100
_END_DELAY_ENV = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
_WAIT_WINDOW_ENV = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
_MISSING_RETRIES_ENV = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"


@dataclass(frozen=True)
class TrialLimits:
    """Bounds on what a trial reads from a job's (untrusted) files."""

    index: IndexLimits = field(default_factory=IndexLimits)
    tensor: TensorLimits = field(default_factory=TensorLimits)
    max_collections_bytes: int = 16 << 20
    max_collection_files: int = 4096
    max_workers: int = 100_000
    #: Records a trial holds at once (its memory: a few hundred bytes each): a tensor's record
    #: at a step, and a step of a worker. A reader that forgets steps it is done with
    #: (:meth:`Trial.forget_before`) holds only the steps it still needs.
    max_records: int = 5_000_000


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class Trial:
    """The tensors a job saved, under ``source``; see the module docstring."""

    def __init__(
        self,
        source: TrialSource,
        name: str | None = None,
        range_steps: tuple[int, int | None] | None = None,
        *,
        poll_interval: float = 2.0,
        end_delay: float | None = None,
        limits: TrialLimits | None = None,
    ) -> None:
        self.source = source
        self.name = name or source.location
        self.path = source.location
        self.range_steps = range_steps
        self.poll_interval = poll_interval
        self.end_delay = _env_number(_END_DELAY_ENV, 1.0) if end_delay is None else end_delay
        self.limits = limits or TrialLimits()
        self.loaded_all_steps = False
        self.errors: list[str] = []  # one line per file left out (corrupt, too big, ...)
        self.dynamic_refresh = True
        self._missing_retries = int(_env_number(_MISSING_RETRIES_ENV, 100))
        self._seen: set[str] = set()
        self._pending: dict[str, int] = {}  # index key -> refreshes spent awaiting its events
        self._waiting: dict[str, StepIndex] = {}  # those indexes, parsed
        self._waiting_records = 0  # their records (held too: counted against the cap)
        self._book = StepBook(int(_env_number(_WAIT_WINDOW_ENV, 1000)))
        self._tensors: dict[str, Tensor] = {}
        self._manager: CollectionManager | None = None
        self._collection_keys: set[str] = set()
        self._end_seen_at: float | None = None
        self._cursor: str | None = None  # index keys up to this one (relative) are settled
        self._records = RecordReader(source)
        self._records_held = 0
        self.refresh()

    # -- refreshing ------------------------------------------------------------------------
    def maybe_refresh(self) -> None:
        if self.dynamic_refresh and not self.loaded_all_steps:
            self.refresh()

    def refresh(self) -> None:
        """Load what was written since the last refresh."""
        if self.loaded_all_steps:
            return
        now = time.monotonic()
        ended = self._end_seen_at is not None and now - self._end_seen_at >= self.end_delay
        if self._end_seen_at is None and self.source.exists(END_MARKER):
            self._end_seen_at = now
            ended = self.end_delay <= 0
        self._load_collections()
        self._load_new_indexes(final=ended)
        if ended:
            self.loaded_all_steps = True

    def _load_collections(self) -> None:
        if self._manager is not None and len(self._collection_keys) >= self._manager.num_workers:
            return  # every worker's file is in: no need to list them again
        keys = [k for k in self.source.list(COLLECTIONS_DIR) if k.endswith("_collections.json")]
        for key in keys[: self.limits.max_collection_files]:
            if key in self._collection_keys:
                continue
            self._collection_keys.add(key)
            try:
                raw = self.source.read(key, self.limits.max_collections_bytes)
                manager = CollectionManager.from_dict(json.loads(raw), untrusted=True)
            except DebugFormatError as err:
                self._skip(str(err))
                continue
            except (ValueError, RecursionError) as err:
                self._skip(f"{self.path}/{key}: {err}")
                continue
            self._merge_collections(manager)

    def _merge_collections(self, manager: CollectionManager) -> None:
        if self._manager is None:
            self._manager = manager
        else:
            for collection in manager.collections.values():
                self._manager.collections.setdefault(collection.name, collection)
            self._manager.num_workers = max(self._manager.num_workers, manager.num_workers)
        self._book.set_num_workers(self._manager.num_workers)

    def _load_new_indexes(self, *, final: bool) -> None:
        listed = self.source.list(INDEX_DIR, self._cursor)
        loaded: list[tuple[str, StepKey, StepIndex]] = []
        for key in listed:
            parsed = parse_index_key(key)
            if key in self._seen:
                continue
            if parsed is None or not self._in_range(parsed.step):
                self._seen.add(key)
                continue
            try:
                loaded.append((key, parsed, self._index(key)))
            except DebugFormatError as err:
                self._seen.add(key)
                self._skip(str(err))
        wanted = {index.event_file for _, _, index in loaded if index.event_file is not None}
        present = self.source.existing(wanted)  # one listing on a store, not a request each
        for key, parsed, index in loaded:
            try:
                self._place(key, parsed, index, present, final=final)
            except DebugFormatError as err:
                self._seen.add(key)
                self._skip(str(err))
        self._advance_cursor(listed)

    def _advance_cursor(self, listed: list[str]) -> None:
        """Move the listing's start past keys that are settled: seen, not waiting for their
        event file, and of a complete step (a slower worker's index of a later step may still
        come, so the cursor stays at the last complete step, as smdebug's index token does)."""
        if self._manager is None:
            return  # until the collections file says how many workers write, nothing is settled
        first_pending = min(self._pending, default=None)
        for key in reversed(listed):
            parsed = parse_index_key(key)
            settled = parsed is None or parsed.step <= self._book.last_complete
            if key in self._seen and settled and (first_pending is None or key < first_pending):
                relative = key[len(INDEX_DIR) + 1 :]
                if self._cursor is None or relative > self._cursor:
                    self._cursor = relative
                return

    def _skip(self, error: str) -> None:
        """Leave a bad file out: the trial goes on with the rest, and says so once."""
        if len(self.errors) < _MAX_ERRORS:
            self.errors.append(error)
            _log.warning("skipped %s", error)

    def _in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        start, end = self.range_steps
        return step >= start and (end is None or step < end)

    def _index(self, key: str) -> StepIndex:
        """The parsed index ``key`` (kept while its event file is awaited: read once)."""
        found = self._waiting.get(key)
        if found is not None:
            return found
        raw = self.source.read(key, self.limits.index.max_bytes)
        try:
            return parse_index(raw, self.limits.index)
        except ValueError as err:
            raise DebugFormatError(f"{self.path}/{key}: {err}") from None

    def _place(
        self, key: str, parsed: StepKey, index: StepIndex, present: set[str], *, final: bool
    ) -> None:
        if index.event_file is not None and index.event_file not in present:
            tries = self._pending.get(key, 0) + 1
            if tries <= self._missing_retries and not final:
                self._await(key, index, tries)  # an uploader may copy the index before its events
                return
            self._stop_waiting(key)
            raise DebugFormatError(
                f"{self.path}/{key}: its event file {index.event_file} is missing"
            )
        self._seen.add(key)
        self._stop_waiting(key)
        self._add_step(parsed.step, parsed.worker, index)

    def _await(self, key: str, index: StepIndex, tries: int) -> None:
        if key not in self._waiting:
            records = len(index.tensors) + len(index.shapes) + 1
            if self._records_held + self._waiting_records + records > self.limits.max_records:
                raise DebugFormatError(
                    f"{self.path}/{key}: more than {self.limits.max_records} records held "
                    "with those awaiting their event files; left out"
                )
            self._waiting_records += records
        self._pending[key] = tries
        self._waiting[key] = index

    def _stop_waiting(self, key: str) -> None:
        self._pending.pop(key, None)
        index = self._waiting.pop(key, None)
        if index is not None:
            self._waiting_records -= len(index.tensors) + len(index.shapes) + 1

    def _add_step(self, step: int, worker: str, index: StepIndex) -> None:
        if worker not in self._book.workers and len(self._book.workers) >= self.limits.max_workers:
            raise DebugFormatError(f"{self.path}: more than {self.limits.max_workers} workers")
        records = len(index.tensors) + len(index.shapes)
        if self._records_held + records + 1 > self.limits.max_records:
            raise DebugFormatError(
                f"{self.path}: more than {self.limits.max_records} records held; "
                f"step {step} of {worker} is left out"
            )
        self._records_held += records + self._book.add(step, worker, index.mode, index.mode_step)
        for entry in index.tensors:
            location = Location(index.event_file or "", entry.start, entry.length)
            self._records.note(location)
            self._file_tensor(entry.name, step, worker, location)
        for shape in index.shapes:
            self._tensor_named(shape.name)._add_shape(step, worker, shape.shape)

    def _file_tensor(self, name: str, step: int, worker: str, location: Location) -> None:
        reduced = reverse_reduction_tensor_name(name)
        if reduced is None:
            self._tensor_named(name)._add_raw(step, worker, location)
        else:
            base, reduction, absolute = reduced
            self._tensor_named(base)._add_reduction(step, worker, (reduction, absolute), location)

    def _tensor_named(self, name: str) -> Tensor:
        found = self._tensors.get(name)
        if found is None:
            found = self._tensors[name] = Tensor(name, self)
        return found

    @property
    def records_held(self) -> int:
        """The records the trial holds now (tensor records and steps of workers), at most
        ``limits.max_records``."""
        return self._records_held

    # -- forgetting (a live reader that has evaluated the old steps) ------------------------
    def forget_before(self, step: int) -> int:
        """Drop what the trial holds of the global steps before ``step`` (their tensors'
        records, the steps themselves, their settled index keys): a live reader (the control
        plane's rules) that is done with them bounds its memory by the steps it still needs.
        The forgotten steps are gone from every query; returns how many records were dropped."""
        dropped = 0
        for name in list(self._tensors):
            tensor = self._tensors[name]
            dropped += tensor._forget_before(step)
            if tensor._empty():
                del self._tensors[name]
        dropped += self._book.forget_before(step)
        self._records_held -= dropped
        self._records.forget_before(step)
        if self._cursor is not None:  # keys up to the cursor are never listed again
            cursor = f"{INDEX_DIR}/{self._cursor}"
            self._seen = {key for key in self._seen if key > cursor}
        return dropped

    # -- reading values (the tensors call this) --------------------------------------------
    def _read_value(self, location: Location, name: str | None) -> np.ndarray:
        where = f"{self.path}/{location.event_file}"
        if location.length > self.limits.index.max_record_bytes:
            raise DebugFormatError(f"{where}: record at byte {location.start}: too large")
        raw = self._records.read(location)
        payload = read_record(raw, 0, where, base=location.start)
        try:
            events = decode_tensor_event(payload, self.limits.tensor)
        except WireError as err:  # its offset is within a nested message, not the file: left out
            raise DebugFormatError(
                f"{where}: record at byte {location.start}: {err.reason}"
            ) from None
        except ValueError as err:
            raise DebugFormatError(f"{where}: record at byte {location.start}: {err}") from None
        for event in events:
            if name is None or event.name == name:
                return event.value
        raise DebugFormatError(
            f"{where}: record at byte {location.start}: no tensor {name!r} in it"
        )

    # -- steps and modes -------------------------------------------------------------------
    @property
    def num_workers(self) -> int:
        return self._manager.num_workers if self._manager is not None else 1

    def _complete(self, step: int) -> bool:
        return self._book.complete(step, self.loaded_all_steps)

    def _global_of(self, step: int, mode: ModeKeys) -> int | None:
        return self._book.global_of(step, mode)

    def _steps_of(
        self, global_steps: Iterable[int], mode: ModeKeys, show_incomplete: bool
    ) -> list[int]:
        return self._book.steps_of(global_steps, mode, show_incomplete, self.loaded_all_steps)

    def _step_passed(self, step: int, mode: ModeKeys) -> bool:
        return self._book.passed(step, mode, self.loaded_all_steps)

    def steps(
        self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """The saved steps of ``mode`` (mode steps; global steps for GLOBAL)."""
        self.maybe_refresh()
        return self._steps_of(self._book.steps, parse_mode(mode), show_incomplete_steps)

    def modes(self) -> list[ModeKeys]:
        self.maybe_refresh()
        return sorted({record.mode for record in self._book.steps.values()})

    def mode(self, global_step: int) -> ModeKeys:
        self.maybe_refresh()
        if global_step not in self._book.steps:
            raise StepUnavailable(global_step, ModeKeys.GLOBAL)
        return self._book.steps[global_step].mode

    def mode_step(self, global_step: int) -> int:
        self.maybe_refresh()
        if global_step not in self._book.steps:
            raise StepUnavailable(global_step, ModeKeys.GLOBAL)
        return self._book.steps[global_step].mode_step

    def global_step(self, mode: ModeKeys | int | str, mode_step: int) -> int:
        self.maybe_refresh()
        mode = parse_mode(mode)
        found = self._global_of(mode_step, mode)
        if found is None:
            raise StepUnavailable(mode_step, mode)
        return found

    def workers(self) -> list[str]:
        self.maybe_refresh()
        return sorted(self._book.workers)

    def last_complete_step(self) -> int:
        return self._book.last_complete

    # -- tensors and collections -----------------------------------------------------------
    def tensor_names(
        self,
        step: int | None = None,
        mode: ModeKeys | int | str = ModeKeys.GLOBAL,
        regex: str | Iterable[str] | None = None,
        collection: str | Collection | None = None,
    ) -> list[str]:
        """Names of the saved tensors, narrowed by step, regex (any of) and collection."""
        self.maybe_refresh()
        names = set(self._tensors)
        if step is not None:
            at = self._global_of(step, parse_mode(mode))
            names = {n for n in names if at is not None and self._tensors[n]._has(at)}
        if regex is not None:
            patterns = [re.compile(p) for p in ([regex] if isinstance(regex, str) else regex)]
            names = {n for n in names if any(p.match(n) for p in patterns)}
        if collection is not None:
            chosen = (
                collection if isinstance(collection, Collection) else self.collection(collection)
            )
            names = {n for n in names if chosen.matches(n)}
        return sorted(names)

    def tensor(self, name: str) -> Tensor:
        if name not in self._tensors:
            self.maybe_refresh()
        found = self._tensors.get(name)
        if found is None:
            raise TensorUnavailable(name)
        return found

    def has_tensor(self, name: str) -> bool:
        self.maybe_refresh()
        return name in self._tensors

    def collections(self) -> dict[str, Collection]:
        self.maybe_refresh()
        if self._manager is None:
            raise MissingCollectionFiles(f"{self.path}/{COLLECTIONS_DIR}")
        return self._manager.collections

    def collection(self, name: str) -> Collection:
        found = self.collections().get(name)
        if found is None:
            raise KeyError(f"{self.path}: no collection named {name!r}")
        return found

    # -- waiting ---------------------------------------------------------------------------
    def has_passed_step(self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL) -> StepState:
        mode = parse_mode(mode)
        self.maybe_refresh()
        at = self._global_of(step, mode)
        if at is not None and self._complete(at):
            return StepState.AVAILABLE
        return (
            StepState.UNAVAILABLE if self._step_passed(step, mode) else StepState.NOT_YET_AVAILABLE
        )

    def wait_for_steps(
        self, required_steps: Iterable[int], mode: ModeKeys | int | str = ModeKeys.GLOBAL
    ) -> None:
        """Return once every step is available or has passed; ``NoMoreData`` if the job ended
        before one of them came (polls every ``poll_interval`` seconds)."""
        mode = parse_mode(mode)
        for step in sorted(required_steps):
            while True:
                self.refresh()
                state = self.has_passed_step(step, mode)
                if state == StepState.AVAILABLE:
                    break
                if self.loaded_all_steps:
                    raise NoMoreData(
                        f"{self.path}: training ended before step {step} of {mode.name}"
                    )
                if state == StepState.UNAVAILABLE:
                    break
                time.sleep(self.poll_interval)

    def __repr__(self) -> str:
        return f"Trial({self.name!r}, steps={len(self._book.steps)}, workers={sorted(self._book.workers)})"


@contextmanager
def _refreshing(trials: Trial | Iterable[Trial], on: bool) -> Iterator[None]:
    """Within the block, queries on ``trials`` look for new files if ``on``; each trial's own
    setting is restored after it."""
    chosen = [trials] if isinstance(trials, Trial) else list(trials)
    before = [trial.dynamic_refresh for trial in chosen]
    for trial in chosen:
        trial.dynamic_refresh = on
    try:
        yield
    finally:
        for trial, state in zip(chosen, before, strict=True):
            trial.dynamic_refresh = state


@contextmanager
def no_refresh(trials: Trial | Iterable[Trial]) -> Iterator[None]:
    """Within the block, queries on ``trials`` do not look for new files."""
    with _refreshing(trials, False):
        yield


@contextmanager
def refresh(trials: Trial | Iterable[Trial]) -> Iterator[None]:
    """Within the block, queries on ``trials`` look for new files (the default)."""
    with _refreshing(trials, True):
        yield
