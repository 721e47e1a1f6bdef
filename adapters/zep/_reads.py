"""Reading a memory's Zep graph back as records: get, list, history, count, as_of.

Zep has no query by memfed's fields, so a read lists the graph's edges, nodes and episodes (three
paged listings, at once) and builds each record's chain of versions from memfed's keys; Zep's own
objects read as derived records (`_records.zeps_own`). `as_of` is answered from the versions' times:
the version written at or before the instant and not closed by then (system time), which for v3 edges
is also Zep's own `expired_at`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from adapters import filters as select
from adapters.base import Include, Page, ProviderUnavailable, Record, RecordNotFound, RecordStatus, utc
from adapters.version_format import BadMetadata
from adapters.zep import _records as records
from adapters.zep._dialect import Dialect
from adapters.zep._http import Http, NotFound
from adapters.zep._shapes import KINDS, Graph, Kind, ListFilters

MAX_PAGES = 1000  # a guard against a cursor that never ends


class ZepReads:
    _http: Http
    _dialect: Dialect
    _carriers: Mapping[Kind, Any]

    async def _graph(self, memory_id: str) -> Graph | None:
        raise NotImplementedError

    async def _vanished(self, memory_id: str, graph: Graph) -> bool:
        raise NotImplementedError

    async def _objects(self, graph: Graph, kind: Kind, filters: ListFilters = ListFilters()
                       ) -> builtins.list[dict[str, Any]]:
        found: builtins.list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            answer = await self._http.exchange(self._dialect.list_page(graph, kind, cursor, filters))
            try:
                items, cursor = self._dialect.page_from(answer.body, answer.headers, kind)
            except ValueError as exc:
                raise ProviderUnavailable(f"zep listed {kind}s in a shape memfed cannot read: {exc}") from exc
            found.extend(items)
            if cursor is None:
                return found
        raise ProviderUnavailable(f"zep's {kind} listing did not end after {MAX_PAGES} pages")

    def _version(self, item: Mapping[str, Any], kind: Kind, memory_id: str) -> records.Version | None:
        try:
            return records.stated(item, kind, self._carriers[kind], memory_id)
        except BadMetadata:
            return None  # memfed's keys edited at Zep: read as Zep's own below

    async def _load(self, memory_id: str, kinds: Sequence[Kind] = KINDS, filters: ListFilters = ListFilters()
                    ) -> dict[str, builtins.list[records.Version]]:
        """Every record of the memory, by id, versions oldest first (empty when it has no graph yet).
        Narrowed to some `kinds` (with what Zep can judge of them) only where no record of another kind
        is wanted: a derived edge or node references objects of every kind."""
        graph = await self._graph(memory_id)
        if graph is None:
            return {}
        try:
            listed = await asyncio.gather(*(self._objects(graph, kind, filters) for kind in kinds))
        except NotFound:
            if await self._vanished(memory_id, graph):
                return {}
            raise
        return self._chains(memory_id, dict(zip(kinds, listed, strict=True)))

    def _chains(self, memory_id: str, listed: Mapping[Kind, Sequence[Mapping[str, Any]]]
                ) -> dict[str, builtins.list[records.Version]]:
        versions: builtins.list[records.Version] = []
        foreign: builtins.list[tuple[Kind, Mapping[str, Any]]] = []
        owner: dict[str, str] = {}  # Zep uuid -> the record it is a version of
        for kind, items in listed.items():
            for item in items:
                if (version := self._version(item, kind, memory_id)) is not None:
                    versions.append(version)
                    owner[version.uuid] = version.record.id
                elif not _other_memory(item, self._carriers[kind], memory_id):
                    foreign.append((kind, item))
        for _, item in foreign:
            owner.setdefault(str(item["uuid"]), records.derived_id(str(item["uuid"])))
        for kind, item in foreign:
            if (own := records.zeps_own(item, kind, memory_id, owner.get)) is not None:
                versions.append(own)
        return records.chains(versions)

    async def _chain(self, memory_id: str, record_id: str) -> builtins.list[records.Version]:
        chain = (await self._load(memory_id)).get(record_id)
        if not chain:
            raise RecordNotFound(record_id)
        return chain

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        chain = await self._chain(memory_id, record_id)
        shown = at_instant(chain, as_of)
        if shown is None:
            raise RecordNotFound(record_id)
        return shown

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        return [v.record for v in await self._chain(memory_id, record_id)]

    async def _current(self, memory_id: str, as_of: datetime | None = None) -> builtins.list[Record]:
        shown = (at_instant(chain, as_of) for chain in (await self._load(memory_id)).values())
        return [r for r in shown if r is not None]

    async def list(
        self, memory_id: str, *, types: Sequence[str] = (), include: Include = "active",
        as_of: datetime | None = None, cursor: str | None = None, limit: int = 50,
    ) -> Page:
        kept = [r for r in await self._current(memory_id, as_of)
                if select.visible(r, include) and (not types or r.type in types)]
        kept.sort(key=select.order_key, reverse=True)
        if cursor is not None:
            after = select.decode_cursor(cursor)
            kept = [r for r in kept if select.order_key(r) < after]
        page = kept[:limit]
        more = len(kept) > limit
        return Page(tuple(page), select.encode_cursor(select.order_key(page[-1])) if more and page else None)

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        async def one(memory_id: str) -> int:
            return sum(1 for r in await self._current(memory_id) if r.status == "active")

        counted = await asyncio.gather(*(one(m) for m in memory_ids))
        return dict(zip(memory_ids, counted, strict=True))


def _other_memory(item: Mapping[str, Any], carrier: Any, memory_id: str) -> bool:
    keys = records.carried(item, carrier)
    return keys is not None and keys.get("memfed_memory") != memory_id


def at_instant(chain: Sequence[records.Version], as_of: datetime | None) -> Record | None:
    """The version shown at `as_of` (the last one when None): written by then and not yet closed."""
    if as_of is None:
        return chain[-1].record
    when = utc(as_of)
    shown = None
    for version in chain:
        if utc(version.record.time.written_at) <= when:
            shown = version.record
    if shown is None:
        return None
    closed = shown.time.invalidated_at
    if closed is not None and utc(closed) <= when:
        return None
    if closed is not None:
        # As it stood then: the version was still current, whatever closed it later.
        status: RecordStatus = "forgotten" if shown.status == "forgotten" else "active"
        return replace(shown, status=status, time=replace(shown.time, invalidated_at=None))
    return shown
