"""The embedded provider: records in one SQLite file, found with FTS5. The default; needs nothing else.

Isolation is a condition, not a container: every memory shares one table, every statement carries the
memory's id and every record fetched by id is checked against it (UHP Memories §10.3), so the
capability document says `enforced_filter`. Meaning is emulated by words (bm25 over the question's
non-stopwords) and is declared emulated. Files are kept by reference; their bytes stay in the
gateway's file store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite
import httpx

from adapters import degraded as entries
from adapters.base import (
    Capabilities,
    Erasure,
    Follows,
    Include,
    NewRecord,
    Page,
    ProviderRejected,
    RecallAnswer,
    RecallQuery,
    Record,
    RecordNotFound,
    Revision,
    Signal,
    Writer,
)
from adapters.local import _embeddings as embeddings
from adapters.local import _kept as kept
from adapters.local import _models as models
from adapters.local import _ranking as ranking
from adapters.local import _recall_sql as recall_sql
from adapters.local import _sql as sql
from adapters.local import task_type as local_types
from adapters.local._connections import LocalConnections
from adapters.local._schema import to_json

# Re-exported: callers have always read the capability document from here.
from adapters.local.capabilities import CAPABILITIES as CAPABILITIES
from adapters.local.capabilities import SEMANTIC_CAPABILITIES
from adapters.local.extensions import TypesAndConsolidation
from adapters.local.queries import LocalQueries
from adapters.media import refuse_unkept_media as _refuse_unkept_media
from adapters.versioning import first_version, not_before, refuse_following, revision_of, tombstone


class LocalProvider(LocalConnections, LocalQueries, TypesAndConsolidation):
    """A `Provider` on one SQLite file. Open it with `open` or `from_config`, never the constructor.
    The connections it reads and writes through are `LocalConnections`' (adapters/local/_connections.py)."""

    @classmethod
    async def from_config(
        cls,
        options: Mapping[str, Any],
        *,
        client: httpx.AsyncClient,
        data_dir: Path,
        api_key: str | None,
    ) -> LocalProvider:
        """`options.path`, or `records.sqlite3` in the data directory. Local calls no one, so the
        client and key the gateway hands every adapter are not used."""
        path = options.get("path")
        provider = await cls.open(Path(path) if path else data_dir / "records.sqlite3")
        provider.semantic = str(options.get("semantic", "off")) == "on"
        provider.semantic_model = str(options.get("semantic_model", "minilm"))
        if provider.semantic_model not in models.MODELS:
            await provider.close()
            raise ValueError(f"semantic_model {provider.semantic_model!r}: known models are "
                             + ", ".join(models.MODELS))
        return provider

    # `semantic = "on"` in the provider's table: meaning search, where memfed[semantic] is installed. Off by
    # default, because the first search after many writes waits for their vectors.
    semantic = False
    semantic_model = "minilm"  # `semantic_model = "mpnet"`: the larger model (adapters/local/_models.py)
    _fill_lock: asyncio.Lock | None = None

    def meaning(self) -> embeddings.Meaning | None:
        return embeddings.load(self.semantic_model) if self.semantic else None

    def capabilities(self) -> Capabilities:
        return CAPABILITIES if self.meaning() is None else SEMANTIC_CAPABILITIES

    # ----------------------------------------------------------------------- writes

    async def remember(self, memory_id: str, record: NewRecord, *, follows: Follows | None = None) -> Record:
        """Write one record as stated. `follows` is for the gateway's own records that mirror a source
        (§5.4); the contract's `NewRecord` has no such field, so it comes as a keyword of this adapter."""
        _refuse_unkept_media(record.content, self.capabilities().media)
        local_types.check(record.type, record.attributes)
        first = first_version(memory_id, record, follows)
        async with self._writing() as db:
            # A write sent again (its first answer was lost) is the record it made the first time.
            done = await self._written_by(db, memory_id, record.write_id)
            return done if done is not None else await self._append(db, first)

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """Append version n+1 over the current one. A forgotten record may be revised and is active
        again: forget closed it, a revision is a new statement by someone allowed to write, and the
        chain keeps both; refusing would push the writer to a new record that loses this history."""
        if revision.content is not None:
            _refuse_unkept_media(revision.content, self.capabilities().media)
        async with self._writing() as db:
            done = await self._written_by(db, memory_id, revision.write_id, record_id)
            if done is not None:
                return done
            current = await self._current(db, memory_id, record_id)
            refuse_following(current, "revised")
            at = not_before(revision.written_at, current.time.written_at)
            following = revision_of(current, memory_id, revision, at)
            local_types.check(following.type, following.attributes)
            await self._close_version(db, current, at)
            return await self._append(db, following)

    async def forget(
        self, memory_id: str, record_id: str, by: Writer, at: datetime, *, write_id: str | None = None
    ) -> Record:
        """Append a version with status forgotten that repeats the last content, so `get` and history
        still show what was forgotten, by whom and when. Forgetting a forgotten record changes nothing."""
        async with self._writing() as db:
            done = await self._written_by(db, memory_id, write_id, record_id)
            if done is not None:
                return done
            current = await self._current(db, memory_id, record_id)
            refuse_following(current, "forgotten")
            if current.status == "forgotten":
                return current
            forgotten = tombstone(current, by=by, at=at, write_id=write_id)
            await self._close_version(db, current, forgotten.time.written_at)
            return await self._append(db, forgotten)

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        """Delete every version of these records, their index entries, and the freed bytes.

        Ids not in this memory are ignored and not reported. Nothing is derived from a record here, so
        `unreachable` is empty, unless another connection to the file still held a read open when the
        write-ahead log was folded in: that reader can still see the old versions, and the log still
        holds them, so then every erased id is reported unreachable.
        """
        wanted = list(dict.fromkeys(record_ids))
        params = {"memory": memory_id, "ids": to_json(wanted, "record ids")}
        async with self._writing() as db:
            found = {row["record_id"] for row in await db.execute_fetchall(sql.FIND, params)}
            if found:
                await self._purge(db, sql.ERASABLE, params)
        erased = tuple(i for i in wanted if i in found)
        complete = await self._checkpoint() if found else True
        return Erasure(erased=erased, unreachable=() if complete else erased)

    async def drop_memory(self, memory_id: str) -> None:
        params = {"memory": memory_id}
        async with self._writing() as db:
            await self._purge(db, sql.IN_MEMORY, params)
        # A reader still open elsewhere only delays reuse of the freed pages; nothing is promised here.
        await self._checkpoint()

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version the write `write_id` made in this memory (`FindsWrites`). Asked through the writer,
        behind anything still queued on it, so a write whose call was cancelled after its statements were
        handed over is seen here once they ran: on this provider a write has settled when its call ends."""
        async with self._locked() as db:
            found = await self._written_by(db, memory_id, write_id)
        return found if found is not None and record_id in (None, found.id) else None

    # ----------------------------------------------------------------------- reads

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        """The current version, or the one current at `as_of`; a forgotten record reads as forgotten."""
        at = sql.ts_or_none(as_of)
        params = {"memory": memory_id, "record": record_id, "as_of": at}
        async with self._reading() as db:
            rows = list(await db.execute_fetchall(sql.get_statement(at), params))
        if not rows:
            raise RecordNotFound(record_id)
        return sql.record(rows[0], at)

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
        """Newest first by the shown version's `written_at`, then id. The cursor is the last (time, id)
        seen, so a record written while a client pages sorts before it and shifts nothing."""
        if limit < 1:
            raise ProviderRejected("limit must be at least 1")
        at = sql.ts_or_none(as_of)
        params: dict[str, Any] = {"memory": memory_id, "as_of": at, "n": limit + 1}
        params["types"] = to_json(list(types), "types")
        if cursor is not None:
            params["after_at"], params["after_id"] = sql.decode_cursor(cursor)
        query = sql.list_statement(at, include, types=bool(types), after=cursor is not None)
        async with self._reading() as db:
            rows = list(await db.execute_fetchall(query, params))
        more = len(rows) > limit
        rows = rows[:limit]
        following = sql.encode_cursor(rows[-1]["written_at"], rows[-1]["record_id"]) if more else None
        return Page(items=tuple(sql.record(r, at) for r in rows), next=following)

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        async with self._reading() as db:
            rows = await db.execute_fetchall(sql.HISTORY, {"memory": memory_id, "record": record_id})
        versions = [sql.record(r) for r in rows]
        if not versions:
            raise RecordNotFound(record_id)
        return versions

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        params = {"memories": to_json(list(memory_ids), "memory ids")}
        async with self._reading() as db:
            rows = await db.execute_fetchall(sql.COUNT, params)
        counts = {m: 0 for m in memory_ids}
        counts.update({row["memory_id"]: row["n"] for row in rows})
        return counts

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """All memories in one statement; each signal ranks on its own and the lists are fused (RRF).
        A filter-only recall therefore comes newest first. `abstain` says that words were asked for
        and none matched. Words rank each memory's records by bm25 over that memory's records alone
        (adapters/local/_recall_sql.py): what other memories hold never moves an order."""
        asked = query.signals()
        if not asked:
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        declared = self.capabilities().signals
        signals = [s for s in asked if s in declared]
        degraded = tuple(entries.entry(s, "not_supported") for s in asked if s not in declared)
        at = sql.ts_or_none(query.as_of)
        # Deeper than `limit`: a record fourth in two lists outranks one first in a single list.
        depth = max(4 * query.limit, 50)
        places, versions = ranking.placed(await self._ranked_rows(memory_ids, signals, query, at, depth))
        meaning = self.meaning()
        if meaning is not None and "query" in signals and query.query and memory_ids:
            nearest = await self._nearest(meaning, memory_ids, query, at, depth)
            ranking.add_meaning(places, versions, nearest)
        hits = ranking.fused_hits(places, versions, len(signals), query.limit, at)
        textual = {s for s in signals if s in ("query", "text")}
        matched_words = any(not textual.isdisjoint(by_signal) for by_signal in places.values())
        return RecallAnswer(hits=hits, abstain=bool(textual) and not matched_words, degraded=degraded)

    async def _ranked_rows(
        self, memory_ids: Sequence[str], signals: Sequence[Signal], query: RecallQuery, at: str | None, depth: int
    ) -> Sequence[Any]:
        """Each signal's ranked list over every memory asked, from one statement: version rows with their
        signal and place. None asked, or nothing any signal could match (no words), is no rows."""
        statement = recall_sql.recall_statement(
            memory_ids,
            signals,
            query=query.query,
            text=query.text,
            filters=query.filters,
            types=query.types,
            as_of=at,
            include=query.include,
            depth=depth,
        )
        if statement is None or not memory_ids:
            return []
        async with self._reading() as db:
            return list(await db.execute_fetchall(*statement))

    # ----------------------------------------------------------------------- helpers: the version chain

    async def _current(self, db: aiosqlite.Connection, memory_id: str, record_id: str) -> Record:
        rows = list(await db.execute_fetchall(sql.CURRENT, {"memory": memory_id, "record": record_id}))
        if not rows:
            raise RecordNotFound(record_id)
        return sql.record(rows[0])

    async def _written_by(
        self, db: aiosqlite.Connection, memory_id: str, write_id: str | None, record_id: str | None = None
    ) -> Record | None:
        """The version the write `write_id` made in this memory, if any. The same write id on another
        record of the memory is a caller's mistake (one write changes one record), refused."""
        if write_id is None:
            return None
        rows = list(await db.execute_fetchall(sql.WRITTEN_BY_WRITE, {"memory": memory_id, "write": write_id}))
        if not rows:
            return None
        if record_id is not None and rows[0]["record_id"] != record_id:
            raise ProviderRejected("this write id was used for another record")
        return sql.record(rows[0])

    async def _append(self, db: aiosqlite.Connection, version: Record) -> Record:
        row = sql.columns(version)
        cursor = await db.execute(sql.INSERT, row)
        title, body = local_types.searchable(version)  # a registered type's projection is found by recall
        await db.execute(sql.INSERT_WORDS, (cursor.lastrowid, title, body))
        await db.execute(sql.SET_WORDS, {"seq": cursor.lastrowid})
        for statement in kept.change(kept.SEQ, 1):
            await db.execute(statement, {"seq": cursor.lastrowid})
        # Read back through the same decoding as every read, so the caller gets exactly what `get` gives.
        return sql.record(row)

    async def _close_version(self, db: aiosqlite.Connection, current: Record, at: datetime) -> None:
        closing = {"record": current.id, "version": current.version}
        for statement in kept.change(kept.CLOSING, -1):  # while it is still current
            await db.execute(statement, closing)
        await db.execute(sql.CLOSE, {"at": sql.ts(at), **closing})

    async def _purge(self, db: aiosqlite.Connection, where: str, params: Mapping[str, Any]) -> None:
        counts = kept.DROP if where == sql.IN_MEMORY else (*kept.change(where, -1), *kept.emptied(where))
        for statement in (*counts, *sql.purge_statements(where)):
            await db.execute(statement, params)
        await embeddings.purge_all(db)  # an erased version's vectors go with its words, whatever the model

    async def _nearest(
        self, meaning: embeddings.Meaning, memory_ids: Sequence[str], query: RecallQuery, at: str | None, depth: int
    ) -> Sequence[Any]:
        """Embed what these memories hold that has no vector yet, then rank. The embedding runs shielded:
        a recall that times out on a large backlog leaves the vectors made so far stored for the next."""
        await asyncio.shield(self._fill(meaning, memory_ids))
        async with self._reading() as db:
            return await meaning.rank(
                db, memory_ids, query.query or "", as_of=at, include=query.include, types=query.types, depth=depth
            )

    async def _fill(self, meaning: embeddings.Meaning, memory_ids: Sequence[str]) -> None:
        # One fill at a time per provider, in batches stored as they are made. A recall cut off by its
        # deadline leaves its fill running; the next recall queues behind it and then finds only what is
        # still missing. Without the lock every recall on a backlog started a fill of the whole backlog,
        # all queued on the one model, so none finished in time and the backlog never went away.
        if self._fill_lock is None:
            self._fill_lock = asyncio.Lock()
        async with self._fill_lock:
            async with self._writing() as db:
                await db.execute(meaning.create)
            while True:
                async with self._reading() as db:
                    missing = await meaning.fill(db, memory_ids, limit=embeddings.FILL_BATCH)
                if not missing:
                    return
                async with self._writing() as db:  # encoded outside the write lock; one short transaction
                    await db.executemany(meaning.insert, missing)
                if len(missing) < embeddings.FILL_BATCH:
                    return
