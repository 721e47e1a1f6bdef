"""How many memories a mem0 OSS server holds, per entity and in all, for the two judgements that need it.

- A search that comes back short proves nothing on OSS: the server cuts its candidate pool across every
  entity before it keeps the asked one (shared/vendors/mem0.md). The answer is complete only when the
  pool could hold the whole server, or when the entity holds no more than the search returned.
- The server lists at most 1,000 memories of one entity, so a write that would make a memory unlistable
  is refused (`RecordLimit`); that needs the entity's size before the write.

Both come from `GET /entities` (each entity with `total_memories`), one call for the whole server, kept
for `ttl` seconds and moved by the adapter's own adds and deletes meanwhile. An entity is memfed's own,
so its kept size is trusted for that long; the server's total moves with every other client's writes, so
it is read anew each time it is asked for. A server without that route is
asked for the one entity's listing instead (then the server's total stays unknown).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from adapters.base import ProviderUnavailable
from adapters.mem0.wire import ABSENT, OSS_LIST_CAP, ListTooLong, Wire

log = logging.getLogger("memfed.adapters.mem0")


class EntitySizes:
    def __init__(self, wire: Wire, *, ttl: float = 10.0) -> None:
        self._wire = wire
        self._ttl = ttl
        self._sizes: dict[str, int] = {}
        self._total: int | None = None
        self._read_at = float("-inf")
        self._no_entities_route = False
        self._reading: asyncio.Future[None] | None = None  # one read at a time, shared by all who need it

    def _stale(self) -> bool:
        return time.monotonic() - self._read_at > self._ttl

    async def _read(self) -> None:
        """Read the sizes, or wait for the read already under way (a recall over many OSS memories asks
        each memory's size at once)."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read_now())
            # Retrieved even if every caller stopped waiting, so a failed read is not logged as lost.
            self._reading.add_done_callback(lambda f: f.cancelled() or f.exception())
        await asyncio.shield(self._reading)

    async def _read_now(self) -> None:
        body = await self._wire.send(self._wire.dialect.entities(), absent_ok=True)
        if body is ABSENT:
            log.info("this mem0 server has no /entities route; entity sizes come from listings")
            self._no_entities_route = True
            return
        rows = body.get("results") if isinstance(body, Mapping) else body
        if not isinstance(rows, list):
            raise ProviderUnavailable("mem0 answered /entities in a shape memfed cannot read")
        sizes: dict[str, int] = {}
        total = 0
        for row in rows:
            count = row.get("total_memories") if isinstance(row, Mapping) else None
            if not isinstance(count, int) or isinstance(count, bool):
                raise ProviderUnavailable("mem0 answered /entities without memory counts")
            # A memory filed under a user and an agent counts twice here: too high a total only makes
            # the pool judgement more careful.
            total += count
            if row.get("type") == "user" and isinstance(row.get("id"), str):
                sizes[row["id"]] = count
        self._sizes, self._total, self._read_at = sizes, total, time.monotonic()

    async def server_total(self) -> int | None:
        """Memories on the whole server now (an upper bound), or None when the server cannot say."""
        if not self._no_entities_route:
            await self._read()
        return None if self._no_entities_route else self._total

    async def of(self, entity: str, *, fresh: bool = False) -> int:
        """Memories the server holds for this entity (forgotten ones included: they are stored)."""
        if not self._no_entities_route and (fresh or self._stale()):
            await self._read()
        if self._no_entities_route:
            return await self._listed(entity)
        return self._sizes.get(entity, 0)

    async def _listed(self, entity: str) -> int:
        body = await self._wire.send(self._wire.dialect.list_page(entity, 1))
        try:
            items, _ = self._wire.dialect.page_items(body)
        except ListTooLong:
            return OSS_LIST_CAP
        except ValueError as exc:
            raise ProviderUnavailable("mem0 answered a listing in a shape memfed cannot read") from exc
        return len(items)

    def added(self, entity: str) -> None:
        self._move(entity, 1)

    def removed(self, entity: str) -> None:
        self._move(entity, -1)

    def dropped(self, entity: str) -> None:
        if self._total is not None:
            self._total = max(0, self._total - self._sizes.get(entity, 0))
        self._sizes.pop(entity, None)

    def _move(self, entity: str, by: int) -> None:
        if self._read_at == float("-inf"):
            return  # nothing read yet: the first read will see this change itself
        self._sizes[entity] = max(0, self._sizes.get(entity, 0) + by)
        if self._total is not None:
            self._total = max(0, self._total + by)
