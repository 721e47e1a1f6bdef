"""Zep v4's asynchronous work, followed to its end with a bound.

A v4 delete (and an ingestion) answers with a task; what it did is known only once
`GET tasks/{uuid}` says `succeeded`, `partial` or `failed`. memfed polls at a growing interval, at most
`wait` seconds in all, so a task Zep never finishes is reported as not known to be done rather than
waited on forever.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from adapters.base import ProviderTimeout, ProviderUnavailable
from adapters.zep._http import Http
from adapters.zep._shapes import Task

DONE = ("succeeded", "partial", "failed")


class TaskFailed(ProviderUnavailable):
    """A task Zep ended as failed or partial: what it was meant to do is not (wholly) done."""

    def __init__(self, task: Task) -> None:
        super().__init__(f"zep task {task.uuid} ended {task.status}: {task.error or 'no reason given'}")
        self.task = task


async def settle(http: Http, dialect: Any, task: Task | None, *, wait: float, interval: float) -> Task | None:
    """The task once it ended; TaskFailed unless it succeeded; ProviderTimeout past `wait`."""
    if task is None:
        return None
    deadline = time.monotonic() + wait
    pause = interval
    while task.status not in DONE:
        if time.monotonic() >= deadline:
            raise ProviderTimeout(f"zep task {task.uuid} still {task.status} after {wait}s")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)
        try:
            task = dialect.task_from(await http.send(dialect.task(task.uuid)))
        except ValueError as exc:
            raise ProviderUnavailable(f"zep answered a task poll memfed cannot read: {exc}") from exc
    if task.status != "succeeded":
        raise TaskFailed(task)
    return task
