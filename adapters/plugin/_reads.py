"""Reads of a plugin provider: get, list, count, and recall (words ranked by memfed; the plugin's own
budgeted Recall for a context recall).

The plugin's listing is the truth of what exists: every read pages through `ListRecords` (the plugin
caps a page) and keeps the records the ledger files under the memories asked; one the ledger does not
know is in no memory. `Recall` carries no question (§5), so `text` is memfed's own ranking over the
listing (declared emulated); `query` and `filters` are not answered and said so in `degraded`.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from adapters.base import (
    Capabilities,
    Hit,
    Include,
    Page,
    Part,
    ProviderRejected,
    ProviderUnavailable,
    RecallAnswer,
    RecallQuery,
    Record,
    RecordNotFound,
    RecordTime,
    Unsupported,
    decode_cursor,
    encode_cursor,
    utc,
)
from adapters.plugin._ledger import Entry, Ledger
from adapters.plugin._pb import memory_pb2 as pb
from adapters.plugin._supervisor import Supervisor
from adapters.ratification import PENDING_KEY

PAGE_SIZE = 100
MAX_PAGES = 10_000  # a guard against a page token that never ends
_WORD = re.compile(r"\w+")


def to_record(entry: Entry, record: pb.MemoryRecord) -> Record:
    """A plugin record with its ledger entry, as memfed's Record. Only text blocks can be read: memory
    content is text-only on this protocol, so another block is a plugin out of contract. A draft (PENDING)
    says so in `attributes["x.ratification"]` (adapters/ratification.py)."""
    parts = []
    for block in record.content:
        if not block.HasField("text"):
            raise ProviderUnavailable(f"plugin record {record.id} holds a content block that is not text")
        parts.append(Part(type="text", text=block.text.text))
    return Record(
        id=entry.record_id, memory_id=entry.memory_id, type=entry.type, content=tuple(parts),
        written_by=entry.written_by,
        time=RecordTime(written_at=entry.written_at, valid_from=entry.valid_from, valid_to=entry.valid_to),
        version=entry.version, supersedes=entry.version - 1 if entry.version > 1 else None,
        title=record.title if entry.titled else None,
        attributes={**entry.attributes, PENDING_KEY: "pending"} if record.status == pb.RECORD_STATUS_PENDING
        else entry.attributes,
        references=entry.references, write_id=entry.write_id,
    )


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 1}


class PluginReads:
    """Reads for `PluginProvider`, which supplies the supervisor, the ledger and the capabilities."""

    _supervisor: Supervisor
    _ledger: Ledger
    _capabilities: Capabilities

    async def _entry(self, memory_id: str, record_id: str) -> Entry:
        entry = await self._ledger.get(record_id)
        if entry is None or entry.memory_id != memory_id or entry.status == "forgotten":
            raise RecordNotFound(record_id)  # another memory's record looks exactly like none at all
        return entry

    async def _plugin_record(self, entry: Entry) -> pb.MemoryRecord:
        _, memory = self._supervisor.memory()
        answer = await memory.call("GetRecord", pb.GetRecordRequest(id=entry.slug), pb.GetRecordResponse)
        if answer.record.id != entry.slug:
            raise ProviderUnavailable(f"the plugin answered GetRecord({entry.slug}) with another record")
        return answer.record

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        if as_of is not None:
            raise Unsupported("a plugin keeps no history: as_of cannot be answered")
        entry = await self._entry(memory_id, record_id)
        try:
            return to_record(entry, await self._plugin_record(entry))
        except RecordNotFound:
            raise RecordNotFound(record_id) from None  # deleted at the plugin, outside memfed

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        """The plugin overwrites, so the current version is all there is (history: none)."""
        return [await self.get(memory_id, record_id)]

    async def _listing(self, memory_ids: Sequence[str], *, canonical_only: bool = False) -> builtins.list[Record]:
        """Every record of these memories at the plugin, read through ListRecords page by page."""
        _, memory = self._supervisor.memory()
        wanted = set(memory_ids)
        found: builtins.list[Record] = []
        token = ""
        for _ in range(MAX_PAGES):
            request = pb.ListRecordsRequest(page_size=PAGE_SIZE, page_token=token)
            if canonical_only:
                request.status_filter = pb.RECORD_STATUS_CANONICAL
            page = await memory.call("ListRecords", request, pb.ListRecordsResponse)
            entries = await self._ledger.by_slugs(r.id for r in page.records)
            for item in page.records:
                entry = entries.get(item.id)
                if entry is not None and entry.memory_id in wanted and entry.status != "forgotten":
                    found.append(to_record(entry, item))
            token = page.next_page_token
            if not token:
                return found
        raise ProviderUnavailable("the plugin's ListRecords never reached its last page")

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
        if as_of is not None:
            raise Unsupported("a plugin keeps no history: as_of cannot be answered")
        after = decode_cursor(cursor, str) if cursor else None
        records = [r for r in await self._listing([memory_id]) if not types or r.type in types]
        records.sort(key=lambda r: (utc(r.time.written_at).isoformat(), r.id), reverse=True)
        if after is not None:
            records = [r for r in records if (utc(r.time.written_at).isoformat(), r.id) < after]
        items = records[:limit]
        more = len(records) > limit
        last = items[-1] if items else None
        next_cursor = encode_cursor((utc(last.time.written_at).isoformat(), last.id)) if more and last else None
        return Page(items=tuple(items), next=next_cursor)

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        counted = dict.fromkeys(memory_ids, 0)
        for record in await self._listing(memory_ids):
            counted[record.memory_id] += 1
        return counted

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """`text` ranked by memfed over the plugin's canonical records (the share of the question's words
        a record holds, newest first among equals); `query`, `filters` and `as_of` are named in degraded."""
        if not query.signals():
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        degraded = tuple(f"{s}:not_supported" for s in query.signals() if s not in self._capabilities.signals)
        if query.as_of is not None:
            degraded += ("as_of:not_supported",)
        asked = words(query.text or "")
        if not asked or not memory_ids:
            return RecallAnswer(hits=(), degraded=degraded)
        scored: builtins.list[tuple[float, Record]] = []
        for record in await self._listing(list(dict.fromkeys(memory_ids)), canonical_only=True):
            if query.types and record.type not in query.types:
                continue
            held = words(" ".join([record.title or "", *(p.text or "" for p in record.content)]))
            share = len(asked & held) / len(asked)
            if share > 0:
                scored.append((share, record))
        scored.sort(key=lambda s: (s[0], utc(s[1].time.written_at), s[1].id), reverse=True)
        hits = tuple(Hit(record, score, ("text",)) for score, record in scored[: query.limit])
        return RecallAnswer(hits=hits, degraded=degraded)

    async def context_records(self, memory_id: str) -> Sequence[Record]:
        """`ContextProvider` (adapters/context.py): the plugin's Recall within its declared default budget."""
        plugin, _ = self._supervisor.memory()
        budget = int(plugin.capabilities.default_token_budget) or 2000
        return [record for record, _, _ in await self.context(memory_id, budget)]

    async def context(self, memory_id: str, budget: int, *, model: str = "memfed") -> builtins.list[
            tuple[Record, float, int]]:
        """The plugin's own budgeted Recall (what an agent kernel asks at context assembly), kept to this
        memory: (record, relevance in [0, 1], tokens) in the plugin's order. The request carries no memory,
        so the plugin spends the budget over every memory it holds; records of other memories are dropped
        here, which can leave this memory fewer records than the budget would hold. A missing or
        out-of-range relevance is replaced by one from the plugin's order, never dropped silently."""
        plugin, memory = self._supervisor.memory()
        if plugin.broker is not None:
            await plugin.broker.announce()
        request = pb.RecallRequest(token_budget=budget, model_target=pb.ModelTarget(id=model, effective_ceiling=budget))
        answer = await memory.call("Recall", request, pb.RecallResponse)
        entries = await self._ledger.by_slugs(r.id for r in answer.records)
        out: builtins.list[tuple[Record, float, int]] = []
        for rank, item in enumerate(answer.records):
            entry = entries.get(item.id)
            if entry is None or entry.memory_id != memory_id or item.status == pb.RECORD_STATUS_PENDING:
                continue
            score = item.relevance_score if item.HasField("relevance_score") else None
            relevance = score if score is not None and 0.0 <= score <= 1.0 else 1.0 / (1 + rank)
            out.append((to_record(entry, item), relevance, int(item.tokens)))
        return out
