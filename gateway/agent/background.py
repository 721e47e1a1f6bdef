"""A background worker that runs a pass, sleeps until the next work is due (or it is woken), and again.

The outbox (gateway/agent/outbox.py) says what a pass does and how long it may sleep; this says how the
loop outlives a failing pass and how tests and shutdown wait for it to go idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("memfed.outbox")


class Worker:
    """Sends what is due, sleeps until the next row is due (or it is woken), and again.

    `deliver(first)` does the work (`first` after a (re)start: everything pending at once, whatever its
    schedule); `next_wait()` says how long to sleep and whether nothing is left to do now."""

    def __init__(self, name: str, deliver: Callable[[bool], Awaitable[object]],
                 next_wait: Callable[[], Awaitable[tuple[float, bool]]], poll: float) -> None:
        self._name, self._deliver, self._next_wait, self._poll = name, deliver, next_wait, poll
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    def wake(self) -> None:
        self._idle.clear()
        self._wake.set()

    async def idle(self) -> None:
        """Return once a pass has found nothing left to send now (tests and shutdown use it)."""
        await self._idle.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        first = True
        while True:
            self._wake.clear()
            try:
                await self._deliver(first)
                first = False
                wait, idle = await self._next_wait()
                if idle:
                    self._idle.set()
            except Exception:  # the worker must outlive a failing pass (a state store hiccup)
                log.exception("outbox pass failed")
                wait = self._poll
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()
