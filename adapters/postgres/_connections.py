"""The PostgreSQL provider's engine: schema made once under a database lock, a transaction per operation,
and PostgreSQL's failures told apart (the server unreachable from a value it refused).

Writes in one memory take turns on a transaction-scoped advisory lock named after the schema and the
memory, so two gateways on the same database cannot both read a record's current version and both
append the next one, nor both claim one write id: the check and the write happen under the same lock,
inside the writing transaction. Reads take no lock. A cancelled operation leaves the transaction to
SQLAlchemy, which rolls it back and returns the connection to the pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from adapters.base import ProviderRejected, ProviderUnavailable
from adapters.postgres._schema import SETUP_LOCK, ddl

_LOCK = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


class PostgresConnections:
    """The engine and schema of one provider; a mixin of `PostgresProvider`."""

    def __init__(self, engine: AsyncEngine, schema: str, *, owns_engine: bool) -> None:
        self._engine = engine
        self._schema = schema
        self._owns_engine = owns_engine
        self._schema_made = False
        self._making = asyncio.Lock()

    async def _make_schema(self) -> None:
        """Run the DDL once per database, whichever replica gets there first; the others wait, then
        find everything made. Until it has run, every operation tries it first: a database that did not
        answer when the gateway started is then made ready by the first call after it comes back."""
        if self._schema_made:
            return
        async with self._making:
            if self._schema_made:
                return
            async with self._translated(), self._engine.begin() as conn:
                await conn.execute(_LOCK, {"key": SETUP_LOCK})
                for statement in ddl(self._schema):
                    await conn.execute(sa.text(statement))
            self._schema_made = True

    async def probe(self) -> None:
        """Whether the database answers and holds the schema (asked once at start; gateway/federation/
        preflight.py warns, and the gateway starts, when it does not)."""
        await self._make_schema()
        async with self._pg_reading() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        if self._owns_engine:
            await self._engine.dispose()

    @asynccontextmanager
    async def _pg_reading(self) -> AsyncIterator[AsyncConnection]:
        await self._make_schema()
        async with self._translated(), self._engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def _writing(self, memory_id: str) -> AsyncIterator[AsyncConnection]:
        """One transaction holding this memory's write lock until it commits or rolls back."""
        await self._make_schema()
        async with self._translated(), self._engine.begin() as conn:
            await conn.execute(_LOCK, {"key": f"memfed_records:{self._schema}:{memory_id}"})
            yield conn

    @asynccontextmanager
    async def _translated(self) -> AsyncIterator[None]:
        """A value PostgreSQL cannot hold (a NUL in text, say) is the caller's; anything else the
        database or the way to it did is the provider being unavailable."""
        try:
            yield
        except (sa_exc.DBAPIError, OSError) as exc:
            if _sqlstate(exc)[:2] in _CALLERS_CLASSES:
                raise ProviderRejected(f"the records store refused a value: {_first_line(exc)}") from exc
            raise ProviderUnavailable(f"records store: {_first_line(exc)}") from exc


async def rows(conn: AsyncConnection, statement: str, params: Mapping[str, Any]) -> Sequence[sa.RowMapping]:
    result = await conn.execute(sa.text(statement), dict(params))
    return result.mappings().all()


async def execute(conn: AsyncConnection, statement: str, params: Mapping[str, Any]) -> None:
    await conn.execute(sa.text(statement), dict(params))


# SQLSTATE classes that name the value sent, not the server: 22 data exception (a NUL in text, a number
# out of range), 54 program limit exceeded (a text too long for a tsvector). SQLAlchemy's asyncpg adapter
# raises both as its generic Error, so the class is read off the driver's code.
_CALLERS_CLASSES = frozenset({"22", "54"})


def _sqlstate(exc: BaseException) -> str:
    code = getattr(getattr(exc, "orig", None), "sqlstate", None) or getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) else ""


def _first_line(exc: BaseException) -> str:
    # The driver's message may carry the statement and its parameters (record content); one line of
    # the original error names the failure without them.
    inner = getattr(exc, "orig", None) or exc
    return (str(inner).splitlines() or [type(inner).__name__])[0][:200]
