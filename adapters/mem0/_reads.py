"""The read side of the mem0 adapter: records by id, listings, counts and recall, as a mixin that
`Mem0Provider` (adapters/mem0/provider.py) inherits.

Separate from adapters/mem0/provider.py, which holds who a memory and a record are at mem0 and how they are
written, so that each module holds one concept. Every read here goes through that identity (`_entity`,
`_stored`, `_fetch`) and then judges what mem0 answered with `adapters.filters`: mem0 orders no listing and
cannot filter on memfed's fields. Recall, which fuses mem0's search with those judgements, is
`_mem0_recall`, inherited through this class.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from adapters import filters as select
from adapters.base import (
    Capabilities,
    Include,
    Page,
    ProviderRejected,
    ProviderUnavailable,
    Record,
    RecordLimit,
    Unsupported,
)
from adapters.mem0 import _records as records
from adapters.mem0._recall import PLATFORM_OR_CHUNK, Mem0Recall, bounded
from adapters.mem0.wire import OSS_LIST_CAP, PLATFORM_MAX_PAGES, ListTooLong, Wire

__all__ = ["PLATFORM_OR_CHUNK", "Mem0Reads", "bounded", "too_many_to_list"]


class Mem0Reads(Mem0Recall):
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
                raise too_many_to_list() from exc
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
        """Active records per memory. Where mem0 lists several entities in one filter (the Platform),
        the memories of up to `PLATFORM_OR_CHUNK` memories come in one run of pages, not one each."""
        unique = list(dict.fromkeys(memory_ids))
        if self._wire.dialect.searches_many_memories and len(unique) > 1:
            groups = [unique[i : i + PLATFORM_OR_CHUNK] for i in range(0, len(unique), PLATFORM_OR_CHUNK)]
            return {m: n for counted in await bounded(self._count_together, groups) for m, n in counted.items()}
        listings = await bounded(self._all, unique)
        return {
            m: sum(1 for s in listing if s.current.status == "active")
            for m, listing in zip(unique, listings, strict=True)
        }

    async def _count_together(self, memory_ids: builtins.list[str]) -> dict[str, int]:
        by_entity = {self._entity(m): m for m in memory_ids}
        counts = dict.fromkeys(memory_ids, 0)
        seen: set[str] = set()  # a record that moves between two pages while they are read counts once
        for page in range(1, PLATFORM_MAX_PAGES + 1):
            body = await self._wire.send(self._wire.dialect.list_many_page(list(by_entity), page))
            try:
                items, more = self._wire.dialect.page_items(body)
            except ValueError as exc:
                raise ProviderUnavailable("mem0 answered a listing in a shape memfed cannot read") from exc
            for item in items:
                memory_id = by_entity.get(str(item.get("user_id")))
                stored = self._stored(item, memory_id) if memory_id else None
                if stored is not None and stored.current.id not in seen:
                    seen.add(stored.current.id)
                    counts[stored.current.memory_id] += stored.current.status == "active"
            if not more:
                return counts
        raise ProviderUnavailable("mem0 kept offering another page of the listing")


# --------------------------------------------------------------------------- helpers


def too_many_to_list() -> RecordLimit:
    """The one answer, on every read, for a memory the OSS server cannot list whole."""
    return RecordLimit(
        f"the mem0 OSS server lists at most {OSS_LIST_CAP} memories of one entity and this memory holds at "
        "least that many (written outside memfed, or before memfed refused such writes): memfed will not "
        "return a listing it cannot prove complete. Erase records at mem0 to bring it under the limit"
    )


def _refuse_as_of(as_of: datetime | None) -> None:
    if as_of is not None:
        raise Unsupported("mem0 cannot read a memory as it stood at an instant")
