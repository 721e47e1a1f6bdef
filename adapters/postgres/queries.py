"""Named and free SQL queries on the PostgreSQL provider: the SQLite provider's sealed container, filled
from PostgreSQL (§6.5).

A caller's statement never runs on PostgreSQL, where every memory shares one table and the gateway's
state sits beside it: as on SQLite, each run copies one memory's current, active records (read with the
memory's id bound here) into a fresh in-memory SQLite database sealed by adapters/local/_query_container.py,
and the statement runs there, bounded in time, rows and bytes (adapters/local/queries.py). The language is
therefore `sql` in SQLite's dialect on both providers, and a named query moves with its memory from one
to the other. Only the copy is this module's: the container's row made from a version's row here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from adapters import version_rows
from adapters.base import Record
from adapters.local.queries import LocalQueries
from adapters.postgres._connections import rows
from adapters.postgres._sql import Statements


class PostgresQueries(LocalQueries):
    """`QueryingProvider` for `PostgresProvider`, which inherits it: LocalQueries' runs, over a copy
    made from PostgreSQL."""

    _sql: Statements
    _pg_reading: Callable[[], AbstractAsyncContextManager[AsyncConnection]]

    async def _snapshot(self, memory_id: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], bool]:
        """The container's rows for the memory's current active records, newest first, at most
        `query_max_records` of them (and whether there were more)."""
        params = {"memory": memory_id, "n": self.query_max_records + 1}
        async with self._pg_reading() as db:
            fetched = list(await rows(db, self._sql.list(None, "active", types=False, after=False), params))
        got = fetched[: self.query_max_records]
        records: list[tuple[Any, ...]] = []
        refs: list[tuple[Any, ...]] = []
        for r in got:
            records.append(container_row(r))
            # Only this memory's own references: one into another memory would name a record a reader
            # of this one may not be allowed to know of.
            refs.extend((r["record_id"], ref["record_id"], ref.get("rel"))
                        for ref in json.loads(r["refs"]) if ref.get("memory_id") == memory_id)
        return records, refs, len(fetched) > self.query_max_records

    async def _versions(self, memory_id: str, wanted: Mapping[str, int]) -> tuple[Record, ...]:
        """Exactly the versions the statement saw, in its order; one erased since is left out."""
        async with self._pg_reading() as db:
            got = await rows(db, self._sql.versions, {"memory": memory_id, "ids": list(wanted)})
        by_id = {r["record_id"]: r for r in got if r["version"] == wanted[r["record_id"]]}
        return tuple(version_rows.record(by_id[i]) for i in wanted if i in by_id)


def container_row(row: version_rows.Row) -> tuple[Any, ...]:
    """One version as the container's `records` row (RECORD_COLUMNS), exactly as the SQLite provider
    makes it: the text parts joined by newlines, instants to the millisecond, the writer as kind:id."""
    content = json.loads(row["content"])
    writer = json.loads(row["written_by"])
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("text") is not None]
    return (
        row["record_id"], row["type"], row["title"], "\n".join(texts), row["content"], row["attributes"],
        row["version"], _millis(row["written_at"]), f"{writer.get('kind')}:{writer.get('id')}", writer.get("type"),
        _millis(row["valid_from"]), _millis(row["valid_to"]),
    )  # fmt: skip


def _millis(stamp: str | None) -> str | None:
    return None if stamp is None else stamp[:23] + "Z"
