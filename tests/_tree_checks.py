"""Helpers for tests of the tree's shape: a guard against endless walks, and a bounded cycle finder."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def hang_breaker(seconds: int = 30) -> Iterator[None]:
    """A walk that never ends keeps the event loop busy, so no asyncio timeout could fire: a SIGALRM
    interrupts it, so that a hang fails the test instead of stopping the whole run. Not a time limit on
    the work: it is far above anything these tests take."""

    def interrupt(_signum: int, _frame: Any) -> None:
        raise TimeoutError("stuck (an endless walk of the tree?)")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cycle_in(parents: dict[str, str | None]) -> list[str] | None:
    """A cycle among the parent links, found with walks that stop after as many steps as there are nodes."""
    for start in parents:
        seen: list[str] = []
        node: str | None = start
        while node is not None and node in parents:
            if node in seen:
                return seen[seen.index(node):]
            seen.append(node)
            if len(seen) > len(parents):
                break
            node = parents[node]
    return None
