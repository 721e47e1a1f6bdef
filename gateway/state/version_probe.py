"""The newest change number in the database, asked cheaply by many requests at once.

Every request asks "has any instance changed the state since I last looked?" before deciding
(gateway/state/coherence.py). Taking a pooled connection for that one `max` costs more than the query
itself, and under load every request would hold a connection for it. So the question goes over one
connection kept for it alone, as a statement the driver keeps prepared, and concurrent requests share
an answer: a request may take the answer of a probe that *started after it arrived* (that probe sees
every change answered before the request was made, which is all coherence promises), never one already
in flight when it arrived (that one may have read the database before the change the caller saw).

The probe runs in a task of its own and callers wait on it shielded, so a caller cancelled by its
timeout never interrupts a statement half way through the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.state import coherence

_NEWEST_SQL = "SELECT max(seq) FROM state_changes"


class VersionProbe:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._running: asyncio.Future[int] | None = None  # the probe in flight, if any
        self._next: asyncio.Future[int] | None = None  # the probe that starts once it ends
        self._held: AsyncConnection | None = None  # PostgreSQL only: the probe's own connection
        self._driver: Any = None  # that connection's asyncpg connection
        self._closed = False

    async def newest(self) -> int:
        """The highest `state_changes.seq` committed before this call was made (or later)."""
        if self._running is None:
            self._running = self._start()
            return await asyncio.shield(self._running)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._next)

    async def close(self) -> None:
        self._closed = True
        for waiting in (self._running, self._next):
            if waiting is not None:
                await asyncio.gather(waiting, return_exceptions=True)
        if self._held is not None:
            held, self._held, self._driver = self._held, None, None
            await held.close()

    def _start(self, into: asyncio.Future[int] | None = None) -> asyncio.Future[int]:
        answer = into if into is not None else asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._ask())
        task.add_done_callback(lambda done: self._finished(done, answer))
        return answer

    def _finished(self, done: asyncio.Task[int], answer: asyncio.Future[int]) -> None:
        if not answer.done():
            if done.cancelled():
                answer.cancel()
            elif (error := done.exception()) is not None:
                answer.set_exception(error)
            else:
                answer.set_result(done.result())
        if not answer.cancelled():
            answer.exception()  # retrieved: a probe whose callers all gave up is not reported as lost
        waiting, self._next = self._next, None
        if waiting is None:
            self._running = None
        elif self._closed:
            self._running = None
            waiting.set_exception(RuntimeError("the state store is closed"))
        else:
            self._running = self._start(waiting)

    async def _ask(self) -> int:
        if self._engine.dialect.name != "postgresql":
            async with self._engine.connect() as conn:
                return await coherence.latest(conn)
        try:
            driver = await self._driver_connection()
            found = await driver.fetchval(_NEWEST_SQL)
        except BaseException:
            await self._drop_held()  # a broken or interrupted connection is never asked again
            raise
        return int(found or 0)

    async def _driver_connection(self) -> Any:
        if self._driver is None:
            self._held = await self._engine.connect()
            raw = await self._held.get_raw_connection()
            self._driver = raw.driver_connection
        return self._driver

    async def _drop_held(self) -> None:
        held, self._held, self._driver = self._held, None, None
        if held is not None:
            await asyncio.shield(held.invalidate())

