"""How many active records each memory holds: a hint in listings and recalls, kept so it rarely costs a call.

A count costs a provider call (for mem0 OSS, a listing of every record of the memory), so it is kept:
fresh for `fresh_seconds`, and after that still shown (the last count seen) while a new one is asked in
the background. A recall never waits for a count (`wait=False`): one never seen is left out, said so in
`degraded`, and asked once the answer has left; other reads wait for it the first time. Concurrent
requests needing the same count share one call. A write through the gateway drops the memory's count
entirely, so no look after it shows a count from before it.

Counting is not the provider's health: it goes through `ProviderHandle.call_without_breaker` (under the
provider's concurrency bound and timeout, never counted by its breaker), in chunks asked one after
another per provider, so a tree of a thousand children neither outlives one call's timeout nor takes
more than one of a provider's concurrent calls. A provider that counts many memories in one vendor call
(`searches_many_memories`: the local provider, mem0 Platform) is asked for `MANY` at once; one that
lists each memory on its own (mem0 OSS) for `EACH`, a few listings per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from gateway.state.tree import MemoryNode

log = logging.getLogger("memfed.counts")

MANY = 500  # memories one count call asks a provider that counts many at once
EACH = 8  # memories one count call asks a provider that lists each on its own (its fan-out is 4)


class RecordCounts:
    def __init__(self, fresh_seconds: float = 2.0, maxsize: int = 100_000) -> None:
        self._fresh_seconds = fresh_seconds
        self._maxsize = maxsize
        # memory id -> (the last count seen, when it was seen), in the order they were last seen. A plain
        # dict, read once per memory with one clock reading per look: a recall over a root with a thousand
        # children reads a thousand of them on the answer's path.
        self._seen: dict[str, tuple[int, float]] = {}
        self._asked: dict[tuple[str, tuple[str, ...]], asyncio.Future[Mapping[str, int]]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def written(self, memory_id: str) -> None:
        """A write through the gateway changed this memory's records: no count of it is right any more."""
        self._seen.pop(memory_id, None)

    def forget_all(self) -> None:
        self._seen.clear()

    def expire_all(self) -> None:
        """Every count becomes old (still shown, asked again): what two seconds without a look would do."""
        self._seen = {memory_id: (n, float("-inf")) for memory_id, (n, _) in self._seen.items()}

    def _keep(self, memory_id: str, count: int) -> None:
        self._seen.pop(memory_id, None)
        self._seen[memory_id] = (count, time.monotonic())
        if len(self._seen) > self._maxsize:  # the ones seen longest ago go first
            for oldest in list(self._seen)[: len(self._seen) - self._maxsize]:
                del self._seen[oldest]

    async def of(self, providers: Any, nodes: Iterable[MemoryNode],
                 later: list[Callable[[], Awaitable[None]]] | None = None,
                 *, wait: bool = True) -> dict[str, int | None]:  # fmt: skip
        """Counts of `nodes` (None where none is known yet, or the provider could not count). Old counts,
        and with `wait=False` unknown ones, are asked in the background: appended to `later` when given
        (a request runs it once its answer has left, so the calls do not compete with the ones the
        answer waits for), else at once."""
        counts: dict[str, int | None] = {}
        wait_for: dict[str, list[str]] = {}
        refresh: dict[str, list[str]] = {}
        old_before = time.monotonic() - self._fresh_seconds
        # Locals and one branch per memory: a recall over a flat tree's thousand children looks here for
        # each of them before its answer can leave.
        seen_of = self._seen.get
        for node in nodes:
            memory_id = node.id
            seen = seen_of(memory_id)
            if seen is not None:
                counts[memory_id] = seen[0]
                if seen[1] >= old_before:
                    continue
                ask = refresh
            elif wait:
                ask = wait_for
            else:
                counts[memory_id] = None
                ask = refresh
            if (ids := ask.get(node.provider)) is None:
                ids = ask[node.provider] = []
            ids.append(memory_id)
        if refresh and later is not None:
            later.append(lambda: self._refresh(providers, refresh))
        elif refresh:
            task = asyncio.create_task(self._refresh(providers, refresh))
            self._background.add(task)  # a task nobody holds may be collected before it finishes
            task.add_done_callback(self._background.discard)
        answers = await asyncio.gather(*(self._shared(providers, name, ids) for name, ids in wait_for.items()))
        for ids, got in zip(wait_for.values(), answers, strict=True):
            counts.update({memory_id: got.get(memory_id) for memory_id in ids})
        return counts

    async def _refresh(self, providers: Any, by_provider: Mapping[str, list[str]]) -> None:
        # Run once the answer has left, perhaps after another request's count of the same memories ended:
        # what was counted since this request looked is not asked again.
        old_before = time.monotonic() - self._fresh_seconds
        still = {name: kept for name, ids in by_provider.items()
                 if (kept := [m for m in ids if (seen := self._seen.get(m)) is None or seen[1] < old_before])}
        await asyncio.gather(*(self._shared(providers, name, ids) for name, ids in still.items()))

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
        out: dict[str, int] = {}
        size = MANY if handle.capabilities().searches_many_memories else EACH
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            try:
                got: Mapping[str, int] = await handle.call_without_breaker(lambda p, c=chunk: p.count(c))
            except Exception as exc:  # counts are a hint; a provider failure must not fail the answer
                log.info("counting records on %s failed (%s)", name, getattr(exc, "reason", type(exc).__name__))
                break  # the rest would most likely fail the same way: asked again on a later look
            for memory_id in chunk:
                if (n := got.get(memory_id)) is not None:
                    self._keep(memory_id, n)
                    out[memory_id] = n
        return out
