"""How an adapter tells the gateway which part of a call's time is not the vendor's.

The gateway times every provider call and counts a call that outlives its timeout against the
provider's circuit breaker. Part of a call's time may be nobody's fault at the vendor: waiting for a
slot the adapter keeps (a thread pool, a per-server turn) behind other callers' work, or running a
caller's own statement under the caller's own budget (a free query). An adapter wraps such an await in
`off_the_clock()`: its time is not charged to the vendor's timeout (the gateway's clock for the call is
pushed back by as much, never past the caller's deadline), and a call cut while inside it is not a
vendor failure.

Outside a gateway call (an adapter used on its own, in a test) `off_the_clock` does nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

Why = Literal["slot", "budget"]


@dataclass
class Pace:
    """One attempt of one gateway call: the vendor's clock and what was kept off it.

    `clock` is the attempt's timeout; while off the clock it runs to `limit` (the caller's, a loop
    time) instead, and after, its deadline is where it was pushed back by the time spent. `off` is the
    seconds kept off it; `cut_while` why it was off the clock when the attempt was cut (None: the
    vendor's own time ran out); `stopped` whether it is off the clock now."""

    clock: asyncio.Timeout | None
    limit: float
    off: float = 0.0
    cut_while: Why | None = None
    stopped: bool = False


_current: ContextVar[Pace | None] = ContextVar("memfed_pace", default=None)


def current() -> Pace | None:
    return _current.get()


def enter(pace: Pace) -> object:
    """Make `pace` the current attempt's (the gateway's handle does this); returns the token to `leave`."""
    return _current.set(pace)


def leave(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]


@contextmanager
def off_the_clock(why: Why = "slot") -> Iterator[None]:
    """The awaits inside are not the vendor's time: waiting for a slot, or a caller's own budget. The
    attempt's clock stops (only the caller's limit still holds) and starts again, where it was, after."""
    pace = _current.get()
    if pace is None or pace.stopped:
        yield  # outside a gateway call, or inside another stretch off the clock
        return
    loop = asyncio.get_running_loop()
    started = loop.time()
    clock = pace.clock
    due = clock.when() if clock is not None and not clock.expired() else None
    if clock is not None and due is not None:
        clock.reschedule(pace.limit)
    pace.stopped = True
    try:
        yield
    except asyncio.CancelledError:  # the caller's limit (or the caller) cut the call in here
        if pace.cut_while is None:
            pace.cut_while = why
        raise
    finally:
        pace.stopped = False
        spent = loop.time() - started
        pace.off += spent
        if clock is not None and due is not None and not clock.expired():
            clock.reschedule(min(due + spent, pace.limit))
