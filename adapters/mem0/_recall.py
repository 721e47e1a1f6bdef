"""Recall on mem0: what each signal finds, how the lists become one ranking, and when to ask mem0 again.

The meaning of a recall is the same on every provider (README, "Recall"): each signal asked ranks the
memories' records on its own (`query` by meaning, `filters` newest first among the records that match),
`types`, `include` and `as_of` narrow every list, and the lists are fused by reciprocal rank fusion, so a
record found by several signals ranks above one found by one, and `why` names the signals that found it.
A record that matches the filters but not the question is therefore returned (after those that match
both); one that matches the question but not the filters too.

mem0 ranks by meaning only, so here the `query` list is mem0's search and the `filters` list is read from
the memory's listing and judged by `adapters.filters`. The search is asked for more than `limit` (forgotten
records and other types are dropped after it ranks) and asked again with a larger pool while it may hold
more: on the OSS server a short answer proves nothing, because the server cuts its candidate pool across
every entity before it keeps the asked one. When the largest pool (`SEARCH_CAP`) still may not hold every
match, the answer says `pool_limited`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from cachetools import LRUCache

from adapters import degraded as entries
from adapters import filters as select
from adapters.base import (
    Capabilities,
    Hit,
    ProviderRejected,
    ProviderUnavailable,
    RecallAnswer,
    RecallQuery,
    Record,
    Signal,
)
from adapters.mem0 import _records as records
from adapters.mem0._sizes import EntitySizes
from adapters.mem0.wire import SEARCH_CAP, Wire

T = TypeVar("T")
A = TypeVar("A")

# Memories one Platform search names in its OR: 500 ids is a body of about 25 KB, and a recall over a
# thousand memories on one provider then costs two vendor calls, not ten.
PLATFORM_OR_CHUNK = 500
_FANOUT = 4  # concurrent vendor calls one adapter call may make (OSS search, erase, counts)
_RRF_K = 60  # as on the local provider: one fusion, one meaning


def oss_pool_floor(top_k: int) -> int:
    """The fewest memories of the whole server an OSS search considers before it keeps the entity: it was
    seen to take about 2 x max(4 x top_k, 60); half of that is assumed, so a doubt means asking again."""
    return max(4 * top_k, 60)


class Mem0Recall:
    """`recall` of a `Provider` over mem0, for `Mem0Provider`, which supplies the wire, the capabilities,
    the identity checks and the listing named below."""

    _wire: Wire
    _capabilities: Capabilities
    _sizes: EntitySizes
    _entity: Callable[[str], str]
    _stored: Callable[[Mapping[str, Any], str], records.Stored | None]
    _all: Callable[[str], Awaitable[builtins.list[records.Stored]]]
    _scopes: LRUCache[tuple[str, ...], Mapping[str, str]]

    def _scope(self, memory_ids: Sequence[str]) -> Mapping[str, str]:
        """Entity id -> memory id for these memories, each once, in order. Kept per list of memories: a
        recall plan names the same few hundred memories of a provider on every recall, and building this
        was ~0.3 ms of the event loop's time per provider before its search could be sent."""
        key = tuple(memory_ids)
        if (kept := self._scopes.get(key)) is None:
            kept = self._scopes[key] = MappingProxyType({self._entity(m): m for m in key})
        return kept

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """`query` by mem0's search, `filters` judged here on the memory's records, fused when both are
        asked. `text` is not declared: it is reported in degraded, never sent."""
        if not query.signals():
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        for condition in query.filters:
            select.check(condition)
        declared = self._capabilities.signals
        degraded = tuple(entries.entry(s, "not_supported") for s in query.signals() if s not in declared)
        if query.as_of is not None:
            degraded += (entries.entry("as_of", "not_supported"),)
        unique = list(dict.fromkeys(memory_ids))
        if not unique or not (query.query or query.filters):
            return RecallAnswer(hits=(), degraded=degraded)
        if not query.filters:
            searched, limited = await self._search(unique, query, depth=query.limit)
            hits = [Hit(record, score, ("query",)) for record, score in searched[: query.limit]]
        elif not query.query:
            hits, limited = [Hit(r, 1.0, ("filters",)) for r in await self._matching(unique, query)], False
        else:
            (searched, limited), matching = await _both(
                self._search(unique, query, depth=max(4 * query.limit, 50)), self._matching(unique, query)
            )
            hits = _fused([r for r, _ in searched], matching)
        if limited:
            degraded += ("pool_limited",)  # a bare condition: the gateway scopes it
        return RecallAnswer(hits=tuple(hits[: query.limit]), degraded=degraded)

    def _kept(self, record: Record, query: RecallQuery) -> bool:
        """What narrows every list: `types` and `include`."""
        return select.visible(record, query.include) and (not query.types or record.type in query.types)

    async def _matching(self, memory_ids: builtins.list[str], query: RecallQuery) -> builtins.list[Record]:
        """The `filters` list: every record that matches, newest first (as on the local provider)."""
        listings = await bounded(self._all, memory_ids)
        kept = [
            s.current
            for listing in listings
            for s in listing
            if self._kept(s.current, query) and all(select.matches(s.current, c) for c in query.filters)
        ]
        kept.sort(key=select.order_key, reverse=True)
        return kept

    async def _search(
        self, memory_ids: builtins.list[str], query: RecallQuery, *, depth: int
    ) -> tuple[builtins.list[tuple[Record, float]], bool]:
        """The `query` list, best first, at most `depth` long; and whether the largest pool mem0 can be
        asked for may still have left out records that belong in the first `limit`."""
        by_entity = self._scope(memory_ids)
        top_k = min(SEARCH_CAP, max(query.limit * 2, query.limit + 10))
        totals: builtins.list[int | None] = []  # the server's size, read at most once per recall
        while True:
            answers = await self._vendor_search(list(by_entity), query.query or "", top_k)
            items = [item for group in answers.values() for item in group]
            # One ranking over all memories: mem0 scores every entity with the same embedding. Items are
            # put in the final order first and decoded only until `depth` are kept: decoding is most of
            # the gateway's work on an answer, and the rest could never be returned.
            ranked: dict[str, tuple[Record, float]] = {}
            for item in sorted(items, key=lambda i: _rank_key(i, by_entity)):
                memory_id = by_entity.get(str(item.get("user_id")))
                stored = self._stored(item, memory_id) if memory_id else None
                if stored is None or not self._kept(stored.current, query):
                    continue
                score = item.get("score")
                if not isinstance(score, int | float) or isinstance(score, bool):
                    raise ProviderUnavailable("mem0 answered a search without scores")
                ranked.setdefault(stored.current.id, (stored.current, float(score)))
                if len(ranked) == depth:
                    break
            found = list(ranked.values())
            if len(found) >= query.limit or await self._exhausted(answers, top_k, totals):
                return found, False
            if top_k >= SEARCH_CAP:
                return found, True
            top_k = min(SEARCH_CAP, top_k * 4)

    async def _exhausted(
        self, answers: Mapping[tuple[str, ...], builtins.list[Any]], top_k: int, totals: builtins.list[int | None]
    ) -> bool:
        """Whether mem0 has nothing more to give these entities for this question. `totals` holds the
        server's size once read, so the widening steps of one recall read it once."""
        if any(len(items) >= top_k for items in answers.values()):
            return False  # a full answer: more may follow
        if self._wire.dialect.searches_many_memories:
            return True  # the Platform filters by entity before it ranks: a short answer is the whole of it
        # OSS: the pool was cut across the whole server before the entity was kept. The answer is whole
        # if each entity holds no more than it got, or if the pool could hold every memory on the server
        # (then what is missing is unlike the question: similarity below 0, which mem0 never returns).
        for group, items in answers.items():
            if await self._sizes.of(group[0]) > len(items):
                break
        else:
            return True
        if not totals:
            totals.append(await self._sizes.server_total())
        return totals[0] is not None and totals[0] <= oss_pool_floor(top_k)

    async def _vendor_search(
        self, entities: builtins.list[str], text: str, top_k: int
    ) -> dict[tuple[str, ...], builtins.list[Mapping[str, Any]]]:
        """Search results per group of entities asked in one call."""
        dialect = self._wire.dialect
        size = PLATFORM_OR_CHUNK if dialect.searches_many_memories else 1
        groups = [tuple(entities[i : i + size]) for i in range(0, len(entities), size)]

        async def one(group: tuple[str, ...]) -> builtins.list[Mapping[str, Any]]:
            body = await self._wire.send(dialect.search(group, text, top_k))
            try:
                return dialect.search_items(body)
            except ValueError as exc:
                raise ProviderUnavailable("mem0 answered a search in a shape memfed cannot read") from exc

        return dict(zip(groups, await bounded(one, groups), strict=True))


# --------------------------------------------------------------------------- helpers


def _fused(searched: Sequence[Record], matching: Sequence[Record]) -> builtins.list[Hit]:
    """Reciprocal rank fusion of the `query` and `filters` lists, scaled so that first in both scores 1.0;
    equal scores keep the newest first, then the higher id, as on the local provider."""
    places: dict[str, dict[Signal, int]] = {}
    by_id: dict[str, Record] = {}
    for signal, ranked in (("query", searched), ("filters", matching)):
        for place, record in enumerate(ranked, start=1):
            places.setdefault(record.id, {})[signal] = place  # type: ignore[index]
            by_id.setdefault(record.id, record)
    best = 2 / (_RRF_K + 1)
    scores = {rid: sum(1 / (_RRF_K + p) for p in at.values()) / best for rid, at in places.items()}
    order = sorted(scores, key=lambda rid: select.order_key(by_id[rid]), reverse=True)
    order.sort(key=lambda rid: -scores[rid])
    signals: tuple[Signal, ...] = ("query", "filters")
    return [Hit(by_id[rid], scores[rid], tuple(s for s in signals if s in places[rid])) for rid in order]


def _rank_key(item: Mapping[str, Any], by_entity: Mapping[str, str]) -> tuple[float, str, str]:
    """A search item's place in the answer: best score first, then memory id, then record id (a record id
    is the vendor id behind one fixed prefix, so ordering by the one orders by the other)."""
    score = item.get("score")
    rank = -float(score) if isinstance(score, int | float) and not isinstance(score, bool) else float("inf")
    return rank, by_entity.get(str(item.get("user_id")), ""), str(item.get("id"))


async def _both(first: Awaitable[A], second: Awaitable[T]) -> tuple[A, T]:
    """Both results, asked at once; if one fails the other is cancelled and the failure is raised."""
    one, two = asyncio.ensure_future(first), asyncio.ensure_future(second)
    try:
        return await one, await two
    finally:
        for task in (one, two):
            if not task.done():
                task.cancel()
        await asyncio.gather(one, two, return_exceptions=True)


async def bounded(call: Callable[[A], Awaitable[T]], items: Sequence[A]) -> list[T]:
    """`call` on each item, at most `_FANOUT` at a time; results in order; the first failure is raised."""
    if len(items) == 1:  # the usual case (one search, one count): no task to schedule, no turn of the loop
        return [await call(items[0])]
    gate = asyncio.Semaphore(_FANOUT)

    async def run(item: A) -> T:
        async with gate:
            return await call(item)

    return list(await asyncio.gather(*(run(i) for i in items)))
