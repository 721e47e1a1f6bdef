"""Recall on Zep: each memory's graph searched on its own (Zep searches one graph per call), every list
fused by reciprocal rank, as every provider fuses its signals.

- `query` and `text` go to Zep's search of edges, nodes and episodes (three calls per graph and signal,
  at once, under the provider's concurrency bound). Zep's search is hybrid (BM25 and embeddings), so
  `text` is answered by it and declared emulated.
- What Zep can judge is asked of it: current facts only (`invalid_at`/`expired_at` is null) unless
  `include: all`; a type whose records are episodes by memfed's `memfed_type` key (v4 `metadata_filters`).
  The rest (`types` across kinds, `as_of`, v4's closing marks) is judged here on what comes back.
- `filters` are memfed's fields, which live in memfed's keys: judged on the graph's listing, narrowed
  where that keeps every answer the same (`_listing`): no edges when no fact can pass and none was
  searched up; on v4, `type` and the `filter_attributes` keys sent to an episodes-only listing and
  `time.valid_from` to the edge listing (`_pushdown`), the candidates' chains then listed whole. A
  searched recall narrows the same listing, never the search (each signal ranks on its own: a record
  matching the question and not the filters is still answered), and the hits the narrowed listing left
  out are read through their own chains. Every condition is judged here on what came back;
  `RecallAnswer.emulated` names what memfed judged alone.
- A hit on a version that a later one closed is dropped (or, with `include: all`, read as its record's
  current version). Edges and v4 objects say so themselves; a v3 node or episode cannot, so its graph
  is listed once to know.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from adapters import filters as select
from adapters.base import Capabilities, Condition, Hit, ProviderUnavailable, RecallAnswer, RecallQuery, Record, Signal
from adapters.zep import _pushdown
from adapters.zep import _records as records
from adapters.zep._http import NotFound
from adapters.zep._reads import ZepReads, at_instant
from adapters.zep._shapes import KINDS, DateCondition, Graph, Kind, ListFilters, SearchFilters

RRF_K = 60
CHAIN_IDS = 100  # record ids asked per chain listing
_BY_TYPE: dict[str, Kind] = {"fact": "edge", "entity": "node"}


def kinds_for(types: Sequence[str]) -> tuple[Kind, ...]:
    if not types:
        return KINDS
    return tuple(k for k in KINDS if any(_BY_TYPE.get(t, "episode") == k for t in types))


def filters_for(query: RecallQuery, kind: Kind) -> SearchFilters:
    dates: tuple[DateCondition, ...] = ()
    if query.include == "active" and query.as_of is None:
        dates = (DateCondition("invalid_at", "is_null"), DateCondition("expired_at", "is_null"))
    meta: tuple[tuple[str, Any], ...] = ()
    episode_types = [t for t in query.types if _BY_TYPE.get(t, "episode") == "episode"]
    # Zep's own episodes (another client's) read as type `episode` and carry no `memfed_type`.
    if kind == "episode" and len(episode_types) == 1 and episode_types[0] != "episode":
        meta = (("memfed_type", episode_types[0]),)
    return SearchFilters(date_all_of=dates, metadata_eq=meta)


def _admitted(conditions: Sequence[Condition]) -> set[str] | None:
    """The record types every `type` condition admits (None: any type), from eq and in conditions; a
    condition of another op admits any type (it is judged by memfed)."""
    admitted: set[str] | None = None
    for cond in conditions:
        if cond.field != "type" or cond.op not in ("eq", "in"):
            continue
        values = {cond.value} if cond.op == "eq" else set(cond.value)
        types = {v for v in values if isinstance(v, str)}
        admitted = types if admitted is None else admitted & types
    return admitted


def listing_for(query: RecallQuery) -> tuple[tuple[Kind, ...], ListFilters]:
    """What a recall lists of a graph: episodes alone when every list can hold only episode types (the
    `filters` list: its `type` conditions and `types`; a searched list, whose hits are read through the
    listing: `types`), asking v4 for those types unless Zep's own `episode` type is among them (its
    episodes carry no `memfed_type`); otherwise all three kinds."""
    by_filters: set[str] | None = set()  # None: any type
    if query.filters:
        by_filters = _admitted(query.filters)
        if query.types:
            by_filters = set(query.types) if by_filters is None else by_filters & set(query.types)
    by_search: set[str] | None = set()
    if query.query or query.text:
        by_search = set(query.types) if query.types else None
    if by_filters is None or by_search is None:
        return KINDS, ListFilters()
    wanted = by_filters | by_search
    if any(_BY_TYPE.get(t, "episode") != "episode" for t in wanted):
        return KINDS, ListFilters()
    if not wanted or "episode" in wanted:
        return ("episode",), ListFilters()
    return ("episode",), ListFilters(episode_types=tuple(sorted(wanted)))


class ZepRecall(ZepReads):
    variant: str
    _filter_attributes: tuple[str, ...] = ()

    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    async def _send(self, call: Any, *, absent_ok: bool = False) -> Any:
        raise NotImplementedError

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        for cond in query.filters:
            select.check(cond)  # refused before anything is asked of Zep
        pushed = self.pushdown(query)
        answered = await asyncio.gather(*(self._recall_one(m, query, pushed) for m in memory_ids))
        lists = [ranked for per_memory in answered for ranked in per_memory]
        # v3 declares the whole signal emulated (its capability document says so); v4 says it per recall.
        emulated = pushed.emulated() if "filters" not in self.capabilities().emulated_signals else ()
        return RecallAnswer(hits=tuple(_fused(lists, query.limit)), emulated=emulated)

    def pushdown(self, query: RecallQuery) -> _pushdown.Pushdown:
        """What of the recall's `filters` is sent to Zep: only on v4, only to a listing that holds
        episodes only (derived edges and nodes reference every kind). Never to a search: each signal ranks
        on its own, so a filter must not narrow the `query` or `text` list (a record matching the question
        and not the filters is answered too); the searched hits are read through the narrowed listing
        with their own chains added (`_listed`)."""
        kinds, listing = listing_for(query)
        narrowed = self.variant == "v4" and kinds == ("episode",)
        return _pushdown.plan(query.filters, self._filter_attributes, narrowed=narrowed,
                              types_listed=bool(listing.episode_types))

    async def _recall_one(self, memory_id: str, query: RecallQuery, pushed: _pushdown.Pushdown
                          ) -> builtins.list[tuple[Signal, builtins.list[Record]]]:
        graph = await self._graph(memory_id)
        if graph is None:
            return []
        signals: tuple[tuple[Signal, str | None], ...] = (("query", query.query), ("text", query.text))
        asked = [(s, t) for s, t in signals if t]
        kinds = kinds_for(query.types)
        searches = [(signal, kind, words) for signal, words in asked for kind in kinds]
        # The listing starts with the searches: only its chains of the hits it left out wait for them.
        searching = asyncio.gather(*(self._search(graph, kind, words, query) for _, kind, words in searches))

        async def hits() -> dict[Kind, builtins.list[dict[str, Any]]]:
            by_kind: dict[Kind, builtins.list[dict[str, Any]]] = {}
            for (_, kind, _), items in zip(searches, await searching, strict=True):
                by_kind.setdefault(kind, []).extend(items)
            return by_kind

        loaded: dict[str, builtins.list[records.Version]] | None = None
        try:
            if query.filters or query.include == "all" or query.as_of is not None or (
                    self.variant == "v3" and any(k != "edge" for _, k, _ in searches)):
                loaded = await self._listing(memory_id, graph, query, pushed, hits, {k for _, k, _ in searches})
            found = await searching
        except NotFound:
            if await self._vanished(memory_id, graph):
                return []
            raise
        finally:
            if not searching.done():
                searching.cancel()  # the listing failed or was cancelled: no search outlives the recall
            elif not searching.cancelled():
                searching.exception()  # retrieved: a search error the listing's own error hid is not logged
        out: list[tuple[Signal, list[Record]]] = []
        for (signal, kind, _), items in zip(searches, found, strict=True):
            ranked = [r for r in (self._hit(memory_id, kind, item, query, loaded) for item in items) if r is not None]
            out.append((signal, _kept(ranked, query)))
        if query.filters:
            assert loaded is not None
            matching = [r for r in (at_instant(c, query.as_of) for c in loaded.values()) if r is not None
                        and all(select.matches(r, cond) for cond in query.filters)]
            matching.sort(key=select.order_key, reverse=True)
            out.append(("filters", _kept(matching, query)))
        return out

    async def _listing(self, memory_id: str, graph: Graph, query: RecallQuery, pushed: _pushdown.Pushdown,
                       hits: Callable[[], Awaitable[Mapping[Kind, Sequence[dict[str, Any]]]]], searched: set[Kind]
                       ) -> dict[str, builtins.list[records.Version]]:
        """The records a recall reads through: the graph's listing, narrowed where the recall's `filters`
        let it be (`pushdown`); a searched hit (of the `searched` kinds, `hits` once the searches answer)
        the narrowed listing left out is read with its chain."""
        kinds, listing = listing_for(query)
        if "edge" not in searched and not _pushdown.admits_type(query.filters, query.types, "fact"):
            # No other record references an edge (a derived one references nodes and episodes), so a
            # recall whose every list excludes facts (no fact searched up either) does not list them.
            kinds = tuple(k for k in kinds if k != "edge")
        listings = {kind: listing for kind in kinds}
        chained: set[Kind] = set()
        if pushed.groups:
            listings["episode"] = replace(listing, metadata_groups=pushed.groups)
            if pushed.needs_chains:
                chained.add("episode")
        if self.variant == "v4" and "edge" in kinds and (dates := _pushdown.edge_dates(query.filters)):
            listings["edge"] = replace(listing, edge_dates=dates)  # a fact's versions may differ in valid_from
            chained.add("edge")
        if not chained and not pushed.groups:
            return await self._load(memory_id, kinds, listing)
        try:
            listed = await asyncio.gather(*(
                self._listed(memory_id, graph, kind, kind_listing, kind in chained,
                             hits if kind_listing != listing and kind in searched else None)
                for kind, kind_listing in listings.items()))
        except NotFound:
            if await self._vanished(memory_id, graph):
                return {}
            raise
        return self._chains(memory_id, dict(zip(listings, listed, strict=True)))

    async def _listed(self, memory_id: str, graph: Graph, kind: Kind, listing: ListFilters, chained: bool,
                      hits: Callable[[], Awaitable[Mapping[Kind, Sequence[dict[str, Any]]]]] | None = None
                      ) -> builtins.list[dict[str, Any]]:
        """The objects of `kind` Zep admits under `listing` with the searched `hits` it left out and, for
        every hit added (and, when `chained`, every record admitted), every version of the record (a second
        listing by `memfed_record`): a version filtered out may be the one that closed a matching one, or
        the one `as_of` shows; a hit must read as its record's current version whatever the filters."""
        found = await self._objects(graph, kind, listing)
        seen = {str(item["uuid"]) for item in found}
        wanted = list(found) if chained else []
        for item in (await hits()).get(kind, ()) if hits is not None else ():
            if str(item["uuid"]) not in seen:
                seen.add(str(item["uuid"]))
                found.append(item)
                wanted.append(item)
        ids = sorted({v.record.id for item in wanted if (v := self._version(item, kind, memory_id))})
        if not ids:
            return found
        for at in range(0, len(ids), CHAIN_IDS):
            batch = ids[at:at + CHAIN_IDS]
            again = ListFilters(edge_properties=(_pushdown.edge_records_filter(batch),)) if kind == "edge" \
                else ListFilters(metadata_groups=(_pushdown.record_ids_group(batch),))
            for item in await self._objects(graph, kind, again):
                if str(item["uuid"]) not in seen:
                    seen.add(str(item["uuid"]))
                    found.append(item)
        return found

    async def _search(self, graph: Graph, kind: Kind, words: str, query: RecallQuery) -> builtins.list[dict[str, Any]]:
        call = self._dialect.search(graph, kind, words, max(query.limit, 10), filters_for(query, kind))
        body = await self._send(call)
        try:
            hits: builtins.list[dict[str, Any]] = self._dialect.hits_from(body, kind)
            return hits
        except ValueError as exc:
            raise ProviderUnavailable(f"zep answered a search in a shape memfed cannot read: {exc}") from exc

    def _hit(self, memory_id: str, kind: Kind, item: Mapping[str, Any], query: RecallQuery,
             loaded: Mapping[str, Sequence[records.Version]] | None) -> Record | None:
        version = self._version(item, kind, memory_id)
        if version is None:
            if records.carried(item, self._carriers[kind]) is not None:
                return None  # another memory's object: never answered here
            version = records.zeps_own(item, kind, memory_id, lambda _: None)
            if version is None:
                return None
        if loaded is not None:
            chain = loaded.get(version.record.id)
            return at_instant(chain, query.as_of) if chain else None
        if _closed(version, self.variant):
            return None
        return version.record


def _closed(version: records.Version, variant: str) -> bool:
    """Whether the object itself says a later version closed it (v4 marks, v3 edges' expired_at)."""
    item = version.item
    if version.derived:
        return version.record.status != "active"
    if version.kind == "edge" and (item.get("expired_at") or item.get("invalid_at")) and variant == "v3":
        return True
    marks = item.get("metadata") if version.kind == "episode" else item.get("attributes")
    return isinstance(marks, Mapping) and records.CLOSED in marks


def _kept(ranked: Sequence[Record], query: RecallQuery) -> builtins.list[Record]:
    """Each record once, at its best rank, as its newest version among the hits (two versions of one
    record both unmarked can only follow a revise whose closing call failed)."""
    place: dict[str, int] = {}
    kept: list[Record] = []
    for record in ranked:
        if not select.visible(record, query.include) or (query.types and record.type not in query.types):
            continue
        at = place.get(record.id)
        if at is None:
            place[record.id] = len(kept)
            kept.append(record)
        elif record.version > kept[at].version:
            kept[at] = record
    return kept


def _fused(lists: Sequence[tuple[Signal, Sequence[Record]]], limit: int) -> builtins.list[Hit]:
    score: dict[tuple[str, str], float] = {}
    why: dict[tuple[str, str], list[Signal]] = {}
    shown: dict[tuple[str, str], Record] = {}
    for signal, ranked in lists:
        for rank, record in enumerate(ranked):
            key = (record.memory_id, record.id)
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
            if signal not in why.setdefault(key, []):
                why[key].append(signal)
            shown.setdefault(key, record)
    order = sorted(score, key=lambda k: (-score[k], k))
    signals = ("query", "text", "filters")
    return [Hit(shown[k], score[k], tuple(s for s in signals if s in why[k])) for k in order[:limit]]
