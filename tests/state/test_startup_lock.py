"""Stores opened at the same moment on one empty database (SQLite and PostgreSQL): all open, the tables are made
once, and one first admin exists, made by exactly one of them and loaded by every one that opened after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from gateway.audit.store import create_audit_tables_on
from gateway.state import schema as t
from gateway.state.store import StateStore
from tests._postgres import PG_URL, fresh_schema


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def empty(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str | None]]:
    """(url, schema) of an empty database: a new SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}", None
        return
    async with fresh_schema("startup") as (_engine, schema):
        yield PG_URL, schema


async def test_stores_opened_together_make_the_tables_and_one_first_admin_once(empty: tuple[str, str | None]) -> None:
    """Four opens at once, each on its own engine (its own connections), each asking for a first admin: none
    fails, exactly one reports the admin it made, the database holds one member, and the last to open knows
    that member's key."""
    url, schema = empty
    stores = await asyncio.gather(*(StateStore.open(url, search_path=schema, schemas=(create_audit_tables_on,),
                                                    first_admin="") for _ in range(4)))
    try:
        made = [s.first_admin for s in stores if s.first_admin is not None]
        assert len(made) == 1
        member_id, secret = made[0]
        async with stores[0].engine.connect() as conn:
            assert (await conn.execute(select(func.count()).select_from(t.members))).scalar_one() == 1
        again = await StateStore.open(url, search_path=schema, first_admin="")
        try:
            assert again.first_admin is None
            found = again.member_for_key(secret)
            assert found is not None and found.id == member_id and found.is_admin
        finally:
            await again.close()
    finally:
        for store in stores:
            await store.close()
