"""A PostgreSQL schema of a test's own, for tests that run on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@asynccontextmanager
async def fresh_schema(prefix: str) -> AsyncIterator[tuple[AsyncEngine, str]]:
    """(an engine on PG_URL, a new schema's name); the schema and everything in it are dropped after.
    A server that cannot be reached skips the test rather than failing it: it is marked `postgres`."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_async_engine(PG_URL)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except OSError as exc:
        await engine.dispose()
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    try:
        yield engine, schema
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await engine.dispose()
