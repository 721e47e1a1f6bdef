"""The embedded provider on PostgreSQL: the local provider's records, kept in the gateway's own database
so that every gateway instance on it serves the same records.

Records live in one table of a schema of their own (`memfed_records` unless configured); every statement
carries the memory's id, so isolation is `enforced_filter` as on SQLite. Words are PostgreSQL's own text
search (a tsvector per version, `ts_rank` against the question): a record's score is a function of that
record alone. Meaning is emulated by words and declared so. Types (`x.task`), consolidation and named
and free queries are the local provider's: the first two work through the public methods here, and
queries run in its sealed SQLite container, filled from PostgreSQL (adapters/postgres/queries.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from adapters import degraded as entries
from adapters import version_rows as rows_codec
from adapters.base import (
    Capabilities,
    Erasure,
    Follows,
    Include,
    NewRecord,
    Page,
    ProviderRejected,
    ProviderUnavailable,
    RecallAnswer,
    RecallQuery,
    Record,
    RecordNotFound,
    Revision,
    Writer,
    decode_cursor,
    encode_cursor,
)

# The SQLite provider's ranking, row for row: both stores return the same version rows.
from adapters.local import _ranking as ranking
from adapters.local import task_type as local_types
from adapters.local.capabilities import CAPABILITIES as LOCAL_CAPABILITIES
from adapters.local.extensions import TypesAndConsolidation
from adapters.media import refuse_unkept_media
from adapters.postgres._connections import PostgresConnections, execute, rows
from adapters.postgres._schema import DEFAULT_SCHEMA, DEFAULT_TEXT_CONFIG, identifier
from adapters.postgres._sql import Statements, words_only
from adapters.postgres.queries import PostgresQueries
from adapters.versioning import first_version, not_before, refuse_following, revision_of, tombstone

# The local provider's claims, every one: queries run in the same sealed SQLite container (queries.py).
CAPABILITIES = LOCAL_CAPABILITIES


class PostgresProvider(PostgresConnections, PostgresQueries, TypesAndConsolidation):
    """A `Provider` on a PostgreSQL schema. Open it with `open` (an engine you own) or `from_config`."""

    def __init__(self, engine: AsyncEngine, schema: str, text_config: str, *, owns_engine: bool) -> None:
        super().__init__(engine, schema, owns_engine=owns_engine)
        self._sql = Statements(schema, text_config)

    @classmethod
    async def open(
        cls,
        engine: AsyncEngine,
        *,
        schema: str = DEFAULT_SCHEMA,
        text_config: str = DEFAULT_TEXT_CONFIG,
        owns_engine: bool = False,
        wait_for_database: bool = False,
    ) -> Self:
        """The provider on `engine`, its schema made if missing. The engine is the caller's to dispose of
        unless `owns_engine`. A database that cannot be reached is `ProviderUnavailable`, unless
        `wait_for_database`: then the provider opens anyway and makes its schema on the first call that
        reaches the database (the gateway's way, so that a provider down at start does not stop it)."""
        provider = cls(
            engine,
            identifier(schema, "schema"),
            identifier(text_config, "text_config"),
            owns_engine=owns_engine,
        )
        try:
            await provider._make_schema()
        except ProviderUnavailable:
            if not wait_for_database:
                await provider.close()
                raise
        except BaseException:
            await provider.close()
            raise
        return provider

    @classmethod
    async def from_config(
        cls, options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path, api_key: str | None
    ) -> PostgresProvider:
        """`options.url` (the gateway passes its `[state] url` when the table names none), `schema` and
        `text_config`. PostgreSQL is reached through its own driver, so the HTTP client is not used."""
        url = options.get("url")
        if not isinstance(url, str) or not url.startswith(("postgresql", "postgres")):
            raise ValueError("the postgres adapter needs a postgresql:// url (its own, or [state] url)")
        if url.startswith(("postgresql://", "postgres://")):
            url = "postgresql+asyncpg://" + url.split("://", 1)[1]
        engine = create_async_engine(url, pool_pre_ping=True)
        return await cls.open(
            engine,
            schema=options.get("schema", DEFAULT_SCHEMA),
            text_config=options.get("text_config", DEFAULT_TEXT_CONFIG),
            owns_engine=True,
            wait_for_database=True,
        )

    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    # ----------------------------------------------------------------------- writes

    async def remember(self, memory_id: str, record: NewRecord, *, follows: Follows | None = None) -> Record:
        refuse_unkept_media(record.content, self.capabilities().media)
        local_types.check(record.type, record.attributes)
        first = first_version(memory_id, record, follows)
        async with self._writing(memory_id) as db:
            # A write sent again (its first answer was lost, or it went to another instance) is the record
            # it made the first time: the memory's lock makes this check and the insert one step.
            done = await self._written_by(db, memory_id, record.write_id)
            return done if done is not None else await self._append(db, first)

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """Append version n+1 over the current one; a forgotten record revised is active again, as on
        the SQLite provider (adapters/local/provider.py says why)."""
        if revision.content is not None:
            refuse_unkept_media(revision.content, self.capabilities().media)
        async with self._writing(memory_id) as db:
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
        """A version with status forgotten repeating the last content; forgetting twice changes nothing."""
        async with self._writing(memory_id) as db:
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
        """Delete every version of these records, words included; ids not in this memory are ignored.

        Nothing is derived from a record here, so nothing is reported unreachable: once the delete
        commits no query on any instance can read the versions again. (The dead rows' bytes stay in the
        table's pages until PostgreSQL reuses them, and in its write-ahead log and backups, as for any
        row the operator's database deletes; README.md says so.)
        """
        wanted = list(dict.fromkeys(record_ids))
        async with self._writing(memory_id) as db:
            deleted = await rows(db, self._sql.erase, {"memory": memory_id, "ids": wanted})
        found = {row["record_id"] for row in deleted}
        return Erasure(erased=tuple(i for i in wanted if i in found), unreachable=())

    async def drop_memory(self, memory_id: str) -> None:
        async with self._writing(memory_id) as db:
            await execute(db, self._sql.drop, {"memory": memory_id})

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version the write `write_id` made in this memory (`FindsWrites`). A write settles when its
        transaction commits, which is before its call returns."""
        async with self._pg_reading() as db:
            found = await self._written_by(db, memory_id, write_id)
        return found if found is not None and record_id in (None, found.id) else None

    # ----------------------------------------------------------------------- reads

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        at = rows_codec.ts_or_none(as_of)
        async with self._pg_reading() as db:
            found = await rows(db, self._sql.get(at), {"memory": memory_id, "record": record_id, "as_of": at})
        if not found:
            raise RecordNotFound(record_id)
        return rows_codec.record(found[0], at)

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
        """Newest first by the shown version's `written_at`, then id; the cursor is the last (time, id)."""
        if limit < 1:
            raise ProviderRejected("limit must be at least 1")
        at = rows_codec.ts_or_none(as_of)
        params: dict[str, Any] = {"memory": memory_id, "n": limit + 1}
        if at is not None:
            params["as_of"] = at
        if types:
            params["types"] = list(types)
        if cursor is not None:
            after_at, params["after_id"] = decode_cursor(cursor, str)
            params["after_at"] = str(after_at)
        statement = self._sql.list(at, include, types=bool(types), after=cursor is not None)
        async with self._pg_reading() as db:
            found = list(await rows(db, statement, params))
        more = len(found) > limit
        found = found[:limit]
        following = encode_cursor((found[-1]["written_at"], found[-1]["record_id"])) if more else None
        return Page(items=tuple(rows_codec.record(r, at) for r in found), next=following)

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        async with self._pg_reading() as db:
            found = await rows(db, self._sql.history, {"memory": memory_id, "record": record_id})
        if not found:
            raise RecordNotFound(record_id)
        return [rows_codec.record(r) for r in found]

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        async with self._pg_reading() as db:
            found = await rows(db, self._sql.count, {"memories": list(memory_ids)})
        counts = {m: 0 for m in memory_ids}
        counts.update({row["memory_id"]: row["n"] for row in found})
        return counts

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """All memories in one statement; each signal ranks on its own and the lists are fused (RRF), as
        on the SQLite provider. `abstain` says that words were asked for and none matched."""
        asked = query.signals()
        if not asked:
            raise ProviderRejected("a recall needs query, text or filters")
        if query.limit < 1:
            raise ProviderRejected("limit must be at least 1")
        declared = self.capabilities().signals
        signals = [s for s in asked if s in declared]
        degraded = tuple(entries.entry(s, "not_supported") for s in asked if s not in declared)
        textual = [s for s in signals if s in ("query", "text")]
        at = rows_codec.ts_or_none(query.as_of)
        statement = self._sql.recall(
            memory_ids,
            signals,
            query=query.query,
            text=query.text,
            filters=query.filters,
            types=query.types,
            as_of=at,
            include=query.include,
            depth=max(4 * query.limit, 50),  # a record fourth in two lists outranks one first in one
        )
        found: list[Any] = []
        if statement is not None and memory_ids:
            async with self._pg_reading() as db:
                found = list(await rows(db, *statement))

        places, versions = ranking.placed(found)
        hits = ranking.fused_hits(places, versions, len(signals), query.limit, at)
        matched_words = any(s in textual for by_signal in places.values() for s in by_signal)
        return RecallAnswer(hits=hits, abstain=bool(textual) and not matched_words, degraded=degraded)

    # ----------------------------------------------------------------------- helpers: the version chain

    async def _current(self, db: AsyncConnection, memory_id: str, record_id: str) -> Record:
        found = await rows(db, self._sql.current, {"memory": memory_id, "record": record_id})
        if not found:
            raise RecordNotFound(record_id)
        return rows_codec.record(found[0])

    async def _written_by(
        self, db: AsyncConnection, memory_id: str, write_id: str | None, record_id: str | None = None
    ) -> Record | None:
        """The version the write `write_id` made in this memory; the same write id on another record of
        the memory is the caller's mistake (one write changes one record), refused."""
        if write_id is None:
            return None
        found = await rows(db, self._sql.written_by_write, {"memory": memory_id, "write": write_id})
        if not found:
            return None
        if record_id is not None and found[0]["record_id"] != record_id:
            raise ProviderRejected("this write id was used for another record")
        return rows_codec.record(found[0])

    async def _append(self, db: AsyncConnection, version: Record) -> Record:
        row = rows_codec.columns(version)
        title, body = local_types.searchable(version)  # a registered type's projection is found by recall
        words = {"search_title": words_only(title), "search_body": words_only(body)}
        await execute(db, self._sql.insert, {**row, **words})
        return rows_codec.record(row)

    async def _close_version(self, db: AsyncConnection, current: Record, at: datetime) -> None:
        params = {"at": rows_codec.ts(at), "record": current.id, "version": current.version}
        await execute(db, self._sql.close, params)
