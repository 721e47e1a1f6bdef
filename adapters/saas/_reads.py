"""The read side of the SaaS memory adapter: records by id, listings, counts and recall, as a mixin that
`SaasProvider` (adapters/saas/provider.py) inherits.

A whole memory is read in one call, the vendor's NDJSON export of the scope (every status, history
included), and its chains are put together here; a migration's listing of a memory therefore costs one
vendor call, not one per page.

Recall keeps memfed's one meaning of a recall (README, "Recall"): each signal asked ranks on its own and the
lists are fused by reciprocal rank fusion, `why` naming the signals that found a record.
- `query` is the vendor's recall (its own fusion of lexical and vector lists, weighted by importance and
  recency); when the vendor says the vector list did not take part (`embedding: false`) although the
  configuration says it is on, the capability document declares `query` emulated from then on (until the
  vendor embeds again), so the gateway says `provider:NAME:query:emulated` like any emulated signal.
- `text` is the lexical half of the same recall: only what the lexical list found, in its order.
- `filters` narrow by kind, tier and category at the vendor (its filter-only recall, ordered by tier,
  importance, recency); a condition on any other field, or a vendor listing full of what memfed drops,
  is judged here over the whole scope instead, which is complete. Every condition is checked here again.
`types` narrow every list (by kind at the vendor, by type here); a `query` or `text` list memfed narrowed
that came back full and short is asked again at the vendor's largest limit, and where it is still short,
fewer may come back than exist, and `degraded` says `filters:applied_after_ranking`. The vendor's scores
order its own lists only; they are never compared with another provider's (the gateway fuses by rank).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from adapters import filters as select  # memfed's filter semantics, the same on every provider
from adapters.base import (
    Capabilities,
    Condition,
    Hit,
    Include,
    Page,
    ProviderRejected,
    RecallAnswer,
    RecallQuery,
    Record,
    RecordNotFound,
    Signal,
    Unsupported,
)
from adapters.saas import _records as records
from adapters.saas import wire as w

RECORD_PREFIX = "hrec_"
_RRF_K = 60
_NATIVE = {"attributes.tier": w.F_TIER, "attributes.category": w.F_CATEGORY}
Chain = builtins.list[Mapping[str, Any]]


class SaasReads:
    """The reads of a `Provider` over the SaaS memory API; `SaasProvider` supplies what is named below."""

    _wire: w.Wire
    _capabilities: Capabilities
    _scope: Callable[[str], dict[str, str]]
    _ours: Callable[[Mapping[str, Any], str], bool]
    _chain: Callable[[str, str], Awaitable[Chain]]
    _versions: Callable[[Sequence[Mapping[str, Any]], str], builtins.list[Record]]
    _embedding_seen: Callable[[bool], None]

    # ------------------------------------------------------------------ records

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        _refuse_as_of(as_of)
        return self._versions(await self._chain(memory_id, record_id), memory_id)[-1]

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        return self._versions(await self._chain(memory_id, record_id), memory_id)

    async def _chains(self, memory_id: str) -> builtins.list[Chain]:
        """Every chain of the memory's scope, from the vendor's export, each oldest first."""
        items = await self._wire.send(w.export(self._scope(memory_id)))
        by_id = {str(i[w.F_ID]): i for i in items if self._ours(i, memory_id)}
        chains = []
        for item in by_id.values():
            if str(item.get(w.F_SUPERSEDES)) in by_id:
                continue  # not the first of its chain
            chain = [item]
            while (nxt := chain[-1].get(w.F_SUPERSEDED_BY)) in by_id and len(chain) <= len(by_id):
                chain.append(by_id[str(nxt)])
            chains.append(chain)
        return chains

    async def _currents(self, memory_id: str) -> builtins.list[Record]:
        return [self._versions(chain, memory_id)[-1] for chain in await self._chains(memory_id)]

    async def list(self, memory_id: str, *, types: Sequence[str] = (), include: Include = "active",
                   as_of: datetime | None = None, cursor: str | None = None, limit: int = 50) -> Page:
        """Newest first by the shown version's `written_at`, then id; the cursor is the last (time, id)."""
        _refuse_as_of(as_of)
        if limit < 1:
            raise ProviderRejected("limit must be at least 1")
        after = select.decode_cursor(cursor) if cursor is not None else None
        rows = sorted((r for r in await self._currents(memory_id)
                       if select.visible(r, include) and (not types or r.type in types)),
                      key=select.order_key, reverse=True)  # fmt: skip
        if after is not None:
            rows = [r for r in rows if select.order_key(r) < after]
        page = rows[:limit]
        following = select.encode_cursor(select.order_key(page[-1])) if len(rows) > limit else None
        return Page(items=tuple(page), next=following)

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        return {m: sum(1 for r in await self._currents(m) if r.status == "active") for m in dict.fromkeys(memory_ids)}

    # ------------------------------------------------------------------ recall

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        if not query.signals():
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        for condition in query.filters:
            select.check(condition)
        if query.include not in ("active", "all"):
            raise ProviderRejected(f"include must be active or all, not {query.include!r}")
        degraded: builtins.list[str] = ["as_of:not_supported"] if query.as_of is not None else []
        hits: builtins.list[Hit] = []
        for memory_id in dict.fromkeys(memory_ids):
            found, notes = await self._recall_one(memory_id, query)
            hits.extend(found)
            degraded.extend(n for n in notes if n not in degraded)
        hits.sort(key=lambda h: (-h.score, h.record.memory_id, h.record.id))
        return RecallAnswer(hits=tuple(hits[: query.limit]), degraded=tuple(degraded))

    async def _recall_one(self, memory_id: str, query: RecallQuery) -> tuple[builtins.list[Hit], builtins.list[str]]:
        depth = min(w.RECALL_LIMIT, max(2 * query.limit, query.limit + 10))
        notes: builtins.list[str] = []
        lists: dict[Signal, builtins.list[tuple[Record, float]]] = {}
        if query.query:
            ranked, embedded, cut = await self._vendor_recall(memory_id, query.query, query, depth, lexical=False)
            lists["query"] = ranked
            self._embedding_seen(embedded)
            notes.extend(cut)
        if query.text:
            ranked, _, cut = await self._vendor_recall(memory_id, query.text, query, depth, lexical=True)
            lists["text"] = ranked
            notes.extend(cut)
        if query.filters:
            ranked, cut = await self._filtered(memory_id, query, depth)
            lists["filters"] = ranked
            notes.extend(cut)
        if len(lists) == 1:
            ((signal, ranked),) = lists.items()
            return [Hit(r, score, (signal,)) for r, score in ranked], notes
        return _fused(lists), notes

    def _kept(self, record: Record, query: RecallQuery) -> bool:
        return select.visible(record, query.include) and (not query.types or record.type in query.types)

    def _kinds(self, query: RecallQuery) -> str | None:
        """The one vendor kind every asked type maps to, so the vendor can narrow by it; else None."""
        kinds = {records.kind_of(t) for t in query.types}
        return kinds.pop() if len(kinds) == 1 else None

    async def _vendor_recall(self, memory_id: str, text: str, query: RecallQuery, depth: int, *,
                             lexical: bool) -> tuple[builtins.list[tuple[Record, float]], bool, builtins.list[str]]:
        """One list from the vendor's recall, asked again at the vendor's largest limit when memfed's own
        narrowing (types, forgotten records, the vector half for `text`) left fewer than asked of a full
        answer."""
        while True:
            call = w.recall(self._scope(memory_id), query=text, limit=depth, kind=self._kinds(query),
                            include_hidden=query.include == "all")
            results, embedded = w.recalled(await self._wire.send(call))
            answered = len(results)
            if lexical:  # what the vector list alone found is not a text hit
                results = sorted((r for r in results if r.lexical_rank is not None),
                                 key=lambda r: r.lexical_rank or 0)
            ranked = await self._decoded([(r.record, r.score) for r in results], memory_id, query)
            cut = _cut(answered, depth, len(ranked))
            if not cut or len(ranked) >= query.limit or depth >= w.RECALL_LIMIT:
                return ranked, embedded, cut
            depth = w.RECALL_LIMIT

    async def _filtered(self, memory_id: str, query: RecallQuery,
                        depth: int) -> tuple[builtins.list[tuple[Record, float]], builtins.list[str]]:
        native = {_NATIVE[c.field]: c.value for c in query.filters
                  if c.field in _NATIVE and c.op == "eq" and isinstance(c.value, str)}
        every_native = all(c.field in _NATIVE and c.op == "eq" and isinstance(c.value, str) for c in query.filters)
        if every_native:
            call = w.recall(self._scope(memory_id), query=None, limit=depth, kind=self._kinds(query),
                            tier=native.get(w.F_TIER), category=native.get(w.F_CATEGORY),
                            include_hidden=query.include == "all")
            results, _ = w.recalled(await self._wire.send(call))
            decoded = await self._decoded([(r.record, r.score) for r in results], memory_id, query)
            kept = [r for r, _ in decoded if _matches(r, query.filters)]
            if len(kept) >= query.limit or not _cut(len(results), depth, len(kept)):
                return [(r, 1.0 / place) for place, r in enumerate(kept, start=1)], []
        # Judged here over the whole scope (also when the vendor's list was full of what memfed drops):
        # complete, ordered as the vendor orders a filter listing.
        kept = sorted((r for r in await self._currents(memory_id)
                       if self._kept(r, query) and _matches(r, query.filters)), key=_listing_order)
        return [(r, 1.0 / place) for place, r in enumerate(kept, start=1)], []

    async def _decoded(self, found: Sequence[tuple[Mapping[str, Any], float]], memory_id: str,
                       query: RecallQuery) -> builtins.list[tuple[Record, float]]:
        """The vendor's hits as memfed records of this memory, best first, each record once (a hit on
        an earlier link of a chain shows the record's current version)."""
        out: dict[str, tuple[Record, float]] = {}
        for item, score in found:
            if not self._ours(item, memory_id):
                continue  # another scope's or a tenant-shared record: never this memory's
            record = await self._current_of(item, memory_id)
            if record is not None and record.id not in out and self._kept(record, query):
                out[record.id] = (record, score)
        return list(out.values())

    async def _current_of(self, item: Mapping[str, Any], memory_id: str) -> Record | None:
        root = records.root_of(item)
        if root is not None and item.get(w.F_SUPERSEDED_BY) is None:
            decoded = records.current(item, record_id=RECORD_PREFIX + root, memory_id=memory_id)
            if decoded is not None:
                return decoded
        if root is None:
            return None  # a record another client chained without memfed's metadata: not reachable by id
        try:
            return self._versions(await self._chain(memory_id, RECORD_PREFIX + root), memory_id)[-1]
        except RecordNotFound:  # erased between the recall and this read: not a hit
            return None


def _matches(record: Record, conditions: Sequence[Condition]) -> bool:
    return all(select.matches(record, c) for c in conditions)


def _listing_order(record: Record) -> tuple[int, float, int, str]:
    tier = record.attributes.get("tier", w.DEFAULT_TIER)
    importance = record.attributes.get("importance", records.DEFAULT_IMPORTANCE)
    try:
        weight = -float(importance)
    except (TypeError, ValueError):
        weight = -records.DEFAULT_IMPORTANCE
    place = w.TIERS.index(tier) if tier in w.TIERS else 1
    return place, weight, -select.order_key(record)[0], record.id


def _cut(answered: int, asked: int, kept: int) -> builtins.list[str]:
    """`filters:applied_after_ranking` when the vendor's list was full and memfed dropped some of it."""
    return ["filters:applied_after_ranking"] if answered >= asked and kept < answered else []


def _fused(lists: Mapping[Signal, Sequence[tuple[Record, float]]]) -> builtins.list[Hit]:
    """Reciprocal rank fusion of the signals' lists, scaled so first in every list scores 1.0; ties keep
    the newest first, then the higher id."""
    places: dict[str, dict[Signal, int]] = {}
    by_id: dict[str, Record] = {}
    for signal, ranked in lists.items():
        for place, (record, _) in enumerate(ranked, start=1):
            places.setdefault(record.id, {})[signal] = place
            by_id.setdefault(record.id, record)
    best = len(lists) / (_RRF_K + 1)
    scores = {rid: sum(1 / (_RRF_K + p) for p in at.values()) / best for rid, at in places.items()}
    order = sorted(scores, key=lambda rid: select.order_key(by_id[rid]), reverse=True)
    order.sort(key=lambda rid: -scores[rid])
    return [Hit(by_id[rid], scores[rid], tuple(s for s in lists if s in places[rid])) for rid in order]


def _refuse_as_of(as_of: datetime | None) -> None:
    if as_of is not None:
        raise Unsupported("the SaaS memory API cannot read a memory as it stood at an instant")
