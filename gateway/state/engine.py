"""The database engine the state store runs on: SQLite (the default) or PostgreSQL, set up for it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def open_engine(url: str, search_path: str | None) -> AsyncEngine:
    kwargs: dict[str, Any] = {}
    if url.startswith("postgresql") and search_path:
        kwargs["connect_args"] = {"server_settings": {"search_path": search_path}}
    engine = create_async_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside a writer, and synchronous=NORMAL commits without an fsync per
    # transaction (a commit survives a crash of the process; a power cut may lose the last few).
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


async def ping(engine: AsyncEngine) -> None:
    """Returns when the database answers a trivial statement; raises the driver's error when it does not."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
