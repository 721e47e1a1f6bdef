"""The read side of the mem0 adapter: records by id, listings, counts and recall, as a mixin that
`Mem0Provider` (adapters/mem0/provider.py) inherits.

Separate from adapters/mem0/provider.py, which holds who a memory and a record are at mem0 and how they are
written, so that each module holds one concept. Every read here goes through that identity (`_entity`,
`_stored`, `_fetch`) and then judges what mem0 answered with `_mem0_select`: mem0 orders no listing,
cannot filter on memfed's fields, and ranks by meaning only. `bounded`, the limit on concurrent vendor
calls, lives here because reads make most of them; erase uses it too.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from adapters.base import (
    Capabilities,
    Hit,
    Include,
    Page,
    ProviderRejected,
    ProviderUnavailable,
    RecallAnswer,
    RecallQuery,
    Record,
    Signal,
    Unsupported,
)
from adapters.mem0 import _records as records
from adapters.mem0 import _select as select
from adapters.mem0.wire import PLATFORM_MAX_PAGES, SEARCH_CAP, ListTooLong, Wire

T = TypeVar("T")
A = TypeVar("A")

# Memories one Platform search names in its OR: 500 ids is a body of about 25 KB, and a recall over a
# thousand memories on one provider then costs two vendor calls, not ten.
PLATFORM_OR_CHUNK = 500
_FANOUT = 4  # concurrent vendor calls one adapter call may make (OSS search, erase, counts)


class Mem0Reads:
    """The reads of a `Provider` over mem0, for `Mem0Provider`, which inherits them and supplies the
    wire, the declared capabilities and the identity checks named below."""

    _wire: Wire
    _capabilities: Capabilities
    _entity: Callable[[str], str]
    _stored: Callable[[Mapping[str, Any], str], records.Stored | None]
    _fetch: Callable[[str, str], Awaitable[tuple[str, records.Stored]]]

    # ------------------------------------------------------------------ reads

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        _refuse_as_of(as_of)
        _, stored = await self._fetch(memory_id, record_id)
        return stored.current

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        _, stored = await self._fetch(memory_id, record_id)
        return (*stored.past, stored.current)

    async def _all(self, memory_id: str) -> builtins.list[records.Stored]:
        """Every record mem0 holds for this memory, across all pages; never a silent prefix."""
        entity = self._entity(memory_id)
        # Keyed by id: a record that moves between two Platform pages while they are read counts once.
        out: dict[str, records.Stored] = {}
        for page in range(1, PLATFORM_MAX_PAGES + 1):
            body = await self._wire.send(self._wire.dialect.list_page(entity, page))
            try:
                items, more = self._wire.dialect.page_items(body)
            except ListTooLong as exc:
                raise ProviderRejected(
                    "the mem0 OSS server lists at most 1000 memories of one entity and this memory holds at "
                    "least that many; memfed will not return a listing it cannot prove complete"
                ) from exc
            except ValueError as exc:
                raise ProviderUnavailable("mem0 answered a listing in a shape memfed cannot read") from exc
            for item in items:
                stored = self._stored(item, memory_id)
                if stored is not None:
                    out[stored.current.id] = stored
            if not more:
                return list(out.values())
        raise ProviderUnavailable("mem0 kept offering another page of the listing")

    async def list(
        self,
        memory_id: str,
        *,
        types: Sequence[str] = (),
        include: Include = "active",
        as_of: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page:
        """Newest first by the shown version's `written_at`, then id. mem0 promises no order (and the
        OSS server none at all), so every record is read and ordered here; the cursor is the last
        (time, id) seen, so a record written while a client pages shifts nothing after it."""
        _refuse_as_of(as_of)
        if limit < 1:
            raise ProviderRejected("limit must be at least 1")
        after = select.decode_cursor(cursor) if cursor is not None else None
        rows = sorted(
            (
                s.current
                for s in await self._all(memory_id)
                if select.visible(s.current, include) and (not types or s.current.type in types)
            ),
            key=select.order_key,
            reverse=True,
        )
        if after is not None:
            rows = [r for r in rows if select.order_key(r) < after]
        page = rows[:limit]
        following = select.encode_cursor(select.order_key(page[-1])) if len(rows) > limit else None
        return Page(items=tuple(page), next=following)

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        unique = list(dict.fromkeys(memory_ids))
        listings = await bounded(self._all, unique)
        return {
            m: sum(1 for s in listing if s.current.status == "active")
            for m, listing in zip(unique, listings, strict=True)
        }

    # ------------------------------------------------------------------ recall

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """`query` by mem0's search; `filters` (and `types`, and leaving forgotten records out) judged
        here on what mem0 returns. `text` is not declared: it is reported in degraded, never sent."""
        if not query.signals():
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        for condition in query.filters:
            select.check(condition)
        degraded = tuple(f"{s}:not_supported" for s in query.signals() if s not in self._capabilities.signals)
        if query.as_of is not None:
            degraded += ("as_of:not_supported",)
        unique = list(dict.fromkeys(memory_ids))
        if not unique or not (query.query or query.filters):
            return RecallAnswer(hits=(), degraded=degraded)
        hits = await (self._search(unique, query) if query.query else self._scan(unique, query))
        return RecallAnswer(hits=tuple(hits[: query.limit]), degraded=degraded)

    def _keep(self, record: Record, query: RecallQuery) -> bool:
        return (
            select.visible(record, query.include)
            and (not query.types or record.type in query.types)
            and all(select.matches(record, c) for c in query.filters)
        )

    async def _search(self, memory_ids: builtins.list[str], query: RecallQuery) -> builtins.list[Hit]:
        by_entity = {self._entity(m): m for m in memory_ids}
        why: tuple[Signal, ...] = ("query", "filters") if query.filters else ("query",)
        # Forgotten records, other types and filters are judged after mem0 ranks, so mem0 is asked for
        # more than `limit`, and asked again for more while it had more to give.
        top_k = min(SEARCH_CAP, max(query.limit * 2, query.limit + 10))
        while True:
            items, exhausted = await self._vendor_search(list(by_entity), query.query or "", top_k)
            # One ranking over all memories: mem0 scores every entity with the same embedding. Items are
            # put in the final order first and decoded only until `limit` are kept: decoding is most of
            # the gateway's work on an answer, and the rest could never be returned.
            hits: dict[str, Hit] = {}
            for item in sorted(items, key=lambda i: _rank_key(i, by_entity)):
                memory_id = by_entity.get(str(item.get("user_id")))
                stored = self._stored(item, memory_id) if memory_id else None
                if stored is None or not self._keep(stored.current, query):
                    continue
                score = item.get("score")
                if not isinstance(score, int | float) or isinstance(score, bool):
                    raise ProviderUnavailable("mem0 answered a search without scores")
                hits.setdefault(stored.current.id, Hit(stored.current, float(score), why))
                if len(hits) == query.limit:
                    break
            ranked = list(hits.values())
            if len(ranked) >= query.limit or exhausted or top_k >= SEARCH_CAP:
                return ranked
            top_k = min(SEARCH_CAP, top_k * 4)

    async def _vendor_search(
        self, entities: builtins.list[str], text: str, top_k: int
    ) -> tuple[builtins.list[Mapping[str, Any]], bool]:
        """Search results over these entities, and whether mem0 had nothing more to give."""
        dialect = self._wire.dialect
        size = PLATFORM_OR_CHUNK if dialect.searches_many_memories else 1
        groups = [entities[i : i + size] for i in range(0, len(entities), size)]

        async def one(group: builtins.list[str]) -> builtins.list[Mapping[str, Any]]:
            body = await self._wire.send(dialect.search(group, text, top_k))
            try:
                return dialect.search_items(body)
            except ValueError as exc:
                raise ProviderUnavailable("mem0 answered a search in a shape memfed cannot read") from exc

        answers = await bounded(one, groups)
        return [item for a in answers for item in a], all(len(a) < top_k for a in answers)

    async def _scan(self, memory_ids: builtins.list[str], query: RecallQuery) -> builtins.list[Hit]:
        """Filters alone: mem0 cannot rank without a question, so every record is read and judged here,
        newest first (as on the local provider)."""
        listings = await bounded(self._all, memory_ids)
        kept = [s.current for listing in listings for s in listing if self._keep(s.current, query)]
        kept.sort(key=select.order_key, reverse=True)
        return [Hit(r, 1.0, ("filters",)) for r in kept]


# --------------------------------------------------------------------------- helpers


def _rank_key(item: Mapping[str, Any], by_entity: Mapping[str, str]) -> tuple[float, str, str]:
    """A search item's place in the answer: best score first, then memory id, then record id (a record id
    is the vendor id behind one fixed prefix, so ordering by the one orders by the other)."""
    score = item.get("score")
    rank = -float(score) if isinstance(score, int | float) and not isinstance(score, bool) else float("inf")
    return rank, by_entity.get(str(item.get("user_id")), ""), str(item.get("id"))


async def bounded(call: Callable[[A], Awaitable[T]], items: Sequence[A]) -> list[T]:
    """`call` on each item, at most `_FANOUT` at a time; results in order; the first failure is raised."""
    if len(items) == 1:  # the usual case (one search, one count): no task to schedule, no turn of the loop
        return [await call(items[0])]
    gate = asyncio.Semaphore(_FANOUT)

    async def run(item: A) -> T:
        async with gate:
            return await call(item)

    return list(await asyncio.gather(*(run(i) for i in items)))


def _refuse_as_of(as_of: datetime | None) -> None:
    if as_of is not None:
        raise Unsupported("mem0 cannot read a memory as it stood at an instant")
