"""uvicorn's server, made to start and stop without the pauses its defaults put in.

Every ``trainops run`` without a running server starts and stops one of these, so a tenth of a
second spent sleeping on the way out shows in every such command.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import uvicorn

__all__ = ["Uvicorn"]

_SHUTDOWN_POLL_S = 0.005


class Uvicorn(uvicorn.Server):
    """uvicorn's server with a main loop that :meth:`exit_now` wakes at once, and a shutdown
    that waits only as long as connections and tasks are still open.

    uvicorn's own loop notices ``should_exit`` only every 0.1 s, and its shutdown sleeps 0.1 s
    before it even looks at the connections, then polls them every 0.1 s: every ``trainops run``
    would pay that on its way out.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()  # idle keep-alive connections close now, busy ones when done
        limit = self.config.timeout_graceful_shutdown
        deadline = None if limit is None else time.monotonic() + limit
        while (state.connections or state.tasks) and not self.force_exit:
            if deadline is not None and time.monotonic() > deadline:
                for task in state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
                break
            await asyncio.sleep(_SHUTDOWN_POLL_S)
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    def exit_now(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                self._loop.call_soon_threadsafe(self._wake.set)
