"""Changes to a mem0 server that breaks under concurrent changes go one at a time, per server.

A real mem0 OSS server (mem0ai 2.2.1 with its faiss store) answers two overlapping changes with 502, may
apply the one it failed, and leaves its index corrupt (shared/vendors/mem0.md). So every add, update and
delete sent to such a server takes the server's turn first: one lock per base URL, shared by every
provider configured on that server.

The turn is held by a task that runs the change to its end. A caller that stops waiting (its timeout, a
cancelled request) gives up the answer, not the turn: the next change cannot reach the server while this
one may still be running there. Each exchange in it is bounded by the wire's own timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from adapters.pace import off_the_clock

T = TypeVar("T")

# Keyed by server and held with the loop that made the lock: a lock is never used from another loop
# (each test runs its own), and a new loop gets a new lock.
_GATES: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
# Changes still running after their caller stopped waiting, held so they are not collected mid-way.
_RUNNING: set[asyncio.Future[Any]] = set()


def _gate(server: str) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    held = _GATES.get(server)
    if held is None or held[0] is not loop:
        held = _GATES[server] = (loop, asyncio.Lock())
    return held[1]


def _settled(task: asyncio.Future[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a change nobody waits for must not log "exception never retrieved"


async def one_at_a_time(server: str, work: Callable[[], Awaitable[T]]) -> T:
    """`work`'s result, run while no other change of this process runs at `server`."""
    gate = _gate(server)
    with off_the_clock("slot"):  # waiting behind other changes is not this server being slow
        await gate.acquire()  # cancelled while waiting: nothing was sent and nothing is held
    try:
        task: asyncio.Future[T] = asyncio.ensure_future(work())
    except BaseException:
        gate.release()
        raise
    _RUNNING.add(task)
    task.add_done_callback(lambda _: gate.release())
    task.add_done_callback(_settled)
    return await asyncio.shield(task)
