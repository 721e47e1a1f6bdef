"""How many active records each memory holds: a hint in listings and recalls, kept so it rarely costs a call.

A count costs a provider call (for mem0, a listing of every record), so it is kept: fresh for
`fresh_seconds`, and after that still shown (the last count seen) while a new one is asked in the
background; a recall waits for a count only when none was ever seen. Concurrent requests needing the
same count share one call. A write through the gateway drops the memory's count entirely, so the writer's
next look shows its own write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from cachetools import LRUCache, TTLCache

from gateway.state.tree import MemoryNode

log = logging.getLogger("memfed.counts")


class RecordCounts:
    def __init__(self, fresh_seconds: float = 2.0, maxsize: int = 100_000) -> None:
        self._fresh: TTLCache[str, int] = TTLCache(maxsize=maxsize, ttl=fresh_seconds)
        self._known: LRUCache[str, int] = LRUCache(maxsize=maxsize)  # the last count seen, however old
        self._asked: dict[tuple[str, tuple[str, ...]], asyncio.Future[Mapping[str, int]]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def written(self, memory_id: str) -> None:
        """A write through the gateway changed this memory's records: no count of it is right any more."""
        self._fresh.pop(memory_id, None)
        self._known.pop(memory_id, None)

    def forget_all(self) -> None:
        self._fresh.clear()
        self._known.clear()

    def expire_all(self) -> None:
        """Every count becomes old (still shown, asked again): what two seconds without a look would do."""
        self._fresh.clear()

    async def of(self, providers: Any, nodes: Iterable[MemoryNode],
                 later: list[Callable[[], Awaitable[None]]] | None = None) -> dict[str, int | None]:  # fmt: skip
        """Counts of `nodes` (None where the provider could not count). Old counts are asked again in the
        background: appended to `later` when given (a request runs it once its answer has left, so the
        calls do not compete with the ones the answer waits for), else at once."""
        counts: dict[str, int | None] = {}
        wait: dict[str, list[str]] = {}
        refresh: dict[str, list[str]] = {}
        for node in nodes:
            if (fresh := self._fresh.get(node.id)) is not None:
                counts[node.id] = fresh
            elif (known := self._known.get(node.id)) is not None:
                counts[node.id] = known
                refresh.setdefault(node.provider, []).append(node.id)
            else:
                wait.setdefault(node.provider, []).append(node.id)
        if refresh and later is not None:
            later.append(lambda: self._refresh(providers, refresh))
        elif refresh:
            task = asyncio.create_task(self._refresh(providers, refresh))
            self._background.add(task)  # a task nobody holds may be collected before it finishes
            task.add_done_callback(self._background.discard)
        answers = await asyncio.gather(*(self._shared(providers, name, ids) for name, ids in wait.items()))
        for ids, got in zip(wait.values(), answers, strict=True):
            counts.update({memory_id: got.get(memory_id) for memory_id in ids})
        return counts

    async def _refresh(self, providers: Any, by_provider: Mapping[str, list[str]]) -> None:
        await asyncio.gather(*(self._shared(providers, name, ids) for name, ids in by_provider.items()))

    def _shared(self, providers: Any, name: str, ids: list[str]) -> asyncio.Future[Mapping[str, int]]:
        # Requests arriving while a count is asked wait for that answer instead of asking again.
        key = (name, tuple(ids))
        asked = self._asked.get(key)
        if asked is None:
            asked = self._asked[key] = asyncio.ensure_future(self._count(providers, name, ids))
            asked.add_done_callback(lambda _: self._asked.pop(key, None))
        return asyncio.shield(asked)

    async def _count(self, providers: Any, name: str, ids: list[str]) -> Mapping[str, int]:
        handle = providers.get(name)
        if handle is None:
            return {}
        try:
            got: Mapping[str, int] = await handle.call(lambda p: p.count(ids), read=True)
        except Exception:  # counts are a hint; a provider failure must not fail the listing
            log.info("counting records on %s failed", name)
            return {}
        for memory_id in ids:
            if (n := got.get(memory_id)) is not None:
                self._fresh[memory_id] = self._known[memory_id] = n
        return got
