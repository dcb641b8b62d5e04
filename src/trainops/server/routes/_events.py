"""The change stream (``GET /events``): a long-poll that answers when the store commits a change
of the topics asked for (a new job or a status change: ``jobs``; hosts placed or ended:
``hosts``; log lines and metrics: ``output``; tuning jobs and trials: ``tuning``; scaling
studies: ``studies``), or when the wait is over.

A client first asks without ``since`` (the cursor of now, at once), then again and again with the
``cursor`` of each answer, re-reading what it shows whenever ``changed`` names a topic; the web
UI's live pages do exactly this. The wait is on the server's event loop
(:class:`~trainops.server._events.ChangeFeed`): a follower holds no thread, and one that hangs
up stops waiting at once.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import QueryParams

from trainops.server._events import MAX_WAIT_S, ChangeFeed, parse_since
from trainops.server._routing import Operation, Param, parse_params
from trainops.server.routes._shapes import API, STRING, json_object
from trainops.store import COMMIT_TOPICS

__all__ = ["EventRoutes"]


class EventRoutes:
    """The change stream of ``feed``."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed

    async def events(self, topics: list[str], since: str | None, wait: float) -> dict[str, Any]:
        """Which of ``topics`` changed after ``since``: at once when one has, else as soon as
        one does, or after ``wait`` seconds with ``changed`` empty. ``cursor`` is the ``since``
        of the next request. Without ``since``: the cursor of now, at once. A cursor from an
        earlier run of the server has every topic changed. ``busy`` (true) when too many
        clients wait already: the answer came at once, ask again a little later."""
        return await self.feed.wait(topics, since, wait)

    async def events_of(self, query: QueryParams) -> dict[str, Any]:
        """:meth:`events` for a URL's query (the web UI's own door to the stream, behind its
        session cookie); :class:`~trainops.server._http.ApiError` 400 naming a bad value."""
        return await self.events(**parse_params(_PARAMS, query))

    def operations(self) -> list[Operation]:
        """``GET /events``."""
        return [
            Operation(
                "GET",
                f"{API}/events",
                self.events,
                params=_PARAMS,
                errors=(400,),
                auth="token",
                store=False,
                long_poll=True,
                returns=json_object(
                    "cursor",
                    "changed",
                    cursor=STRING,
                    changed={"type": "array", "items": {"enum": list(COMMIT_TOPICS)}},
                    busy={"type": "boolean"},
                ),
            )
        ]


def _since(text: str) -> str:
    parse_since(text)  # a ValueError says what a cursor looks like
    return text


_PARAMS = (
    Param(
        "topics",
        "array",
        default=list(COMMIT_TOPICS),
        choices=COMMIT_TOPICS,
        description="the topics to hear of (repeated); all where omitted",
    ),
    Param("since", convert=_since, description="the `cursor` of the previous answer"),
    Param(
        "wait",
        "number",
        default=0,
        ge=0,
        le=MAX_WAIT_S,
        description="seconds to wait for a change when none is there yet",
    ),
)
