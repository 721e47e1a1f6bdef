"""Fixtures every suite may use: a fresh database for the decision log, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests._postgres import fresh_schema


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A fresh database for the decision log: a SQLite file, or a PostgreSQL schema of its own, dropped
    afterwards."""
    if request.param == "sqlite":
        eng = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/audit.db")
        yield eng
        await eng.dispose()
        return
    async with fresh_schema("audit") as (admin, schema):
        yield admin.execution_options(schema_translate_map={None: schema})
