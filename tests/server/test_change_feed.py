"""The change feed on its own: a commit on another thread wakes every follower at once, a
follower past the bound is answered at once (``busy``), stopping the feed answers everyone, and
the store tells the feed of its commits with their topics (and of nothing it rolled back)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from trainops.server._events import ChangeFeed, parse_since
from trainops.store import CommitSignal, MetadataStore, TuningJobExistsError

T = TypeVar("T")


def _run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``scenario()`` on a loop of its own, in a thread of its own (the session may have a loop
    running in this one: Playwright's)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(lambda: asyncio.run(scenario())).result()


async def _until(predicate: object) -> None:
    assert callable(predicate)
    while not predicate():
        await asyncio.sleep(0)  # yield to the followers until they wait


def test_a_commit_on_another_thread_wakes_every_follower() -> None:
    async def scenario() -> list[dict[str, object]]:
        signal = CommitSignal()
        feed = ChangeFeed(signal)
        await feed.start()
        since = feed.cursor()
        followers = [asyncio.ensure_future(feed.wait(["jobs"], since, 60)) for _ in range(10)]
        await _until(lambda: feed.waiting == 10)
        writer = threading.Thread(target=signal.committed, args=("jobs",))
        writer.start()
        writer.join()
        answers = await asyncio.wait_for(asyncio.gather(*followers), 30)
        feed.stop()
        return answers

    answers = _run(scenario)
    assert all(a["changed"] == ["jobs"] for a in answers)
    assert {parse_since(str(a["cursor"]))[1] for a in answers} == {1}


def test_a_follower_past_the_bound_is_answered_at_once_and_stopping_answers_all() -> None:
    async def scenario() -> tuple[dict[str, object], dict[str, object]]:
        feed = ChangeFeed(CommitSignal(), max_waiters=1)
        await feed.start()
        first = asyncio.ensure_future(feed.wait(["jobs"], feed.cursor(), 60))
        await _until(lambda: feed.waiting == 1)
        busy = await feed.wait(["jobs"], feed.cursor(), 60)
        feed.stop()
        return busy, await asyncio.wait_for(first, 30)

    busy, stopped = _run(scenario)
    assert busy["busy"] is True and busy["changed"] == []
    assert stopped["changed"] == [] and "busy" not in stopped


def test_the_store_tells_of_each_commit_with_its_topic(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "trainops.db")
    heard: list[str] = []
    store.commits.subscribe(heard.append)
    store.create_tuning_job("tune", {}, "file:///code.tar.gz", 1.0)
    assert heard == ["tuning"]
    version = store.commits.version
    with pytest.raises(TuningJobExistsError):  # rolled back: nothing to tell
        store.create_tuning_job("tune", {}, "file:///code.tar.gz", 2.0)
    assert heard == ["tuning"] and store.commits.version == version
    assert store.commits.changed_since(version - 1, ["jobs", "tuning"]) == ["tuning"]
    assert store.commits.changed_since(version, ["jobs", "tuning"]) == []
    store.close()
