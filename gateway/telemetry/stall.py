"""How long the event loop was held: a ticker task that asks to wake every few milliseconds and records how
late it woke.

A callback that keeps the loop (a large dict resize, a sort, a page computed in one go) delays every other
request by as long as it runs; from outside that only shows as a slow answer to whichever request happened
to wait. Measured inside, the lateness of a timer that should have fired is exactly the time the loop was
not free. The watch keeps the longest lateness since it started, the longest of the last `window` seconds
(what a scraper polling more often than that sees without missing any), and how many wakes were later than
`STALL_SECONDS`; telemetry/metrics.py exports them as `memfed.loop.stall.*` gauges.

The figures are durations and a count: nothing a caller sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

EVERY = 0.005  # seconds between two wakes: a stall shorter than this is indistinguishable from timer slack
WINDOW = 10.0  # seconds the "recent" figure covers
STALL_SECONDS = 0.020  # the target: no request holds the loop longer than this


class StallWatch:
    """The loop's lateness, recorded by a task started with `start` (on the loop to watch)."""

    def __init__(self, every: float = EVERY, window: float = WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.window, self.clock = every, window, clock
        self.longest = 0.0  # seconds, since the watch started
        self.stalls = 0  # wakes later than STALL_SECONDS
        self._recent: deque[tuple[int, float]] = deque()  # (whole second, longest lateness in it), oldest first
        self._task: asyncio.Task[None] | None = None

    def note(self, late: float) -> None:
        """Record one wake `late` seconds after it was due."""
        late = max(0.0, late)
        self.longest = max(self.longest, late)
        if late > STALL_SECONDS:
            self.stalls += 1
        second = int(self.clock())
        if self._recent and self._recent[-1][0] == second:
            if late > self._recent[-1][1]:
                self._recent[-1] = (second, late)
        else:
            self._recent.append((second, late))
        self._forget(second)

    def recent(self) -> float:
        """The longest lateness of the last `window` seconds."""
        self._forget(int(self.clock()))
        return max((late for _, late in self._recent), default=0.0)

    def _forget(self, second: int) -> None:
        while self._recent and self._recent[0][0] <= second - self.window:
            self._recent.popleft()

    async def _run(self) -> None:
        while True:
            due = self.clock() + self.every
            await asyncio.sleep(self.every)
            self.note(self.clock() - due)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="memfed-loop-stall-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


_current: StallWatch | None = None


def watching(watch: StallWatch | None) -> None:
    """The watch the gauges read (None: no figures)."""
    global _current
    _current = watch


def current() -> StallWatch | None:
    return _current
