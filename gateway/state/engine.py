"""The database engine the state store runs on: SQLite (the default) or PostgreSQL, set up for it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

BUSY_TIMEOUT_MS = 5000  # how long a statement waits for another connection's write lock


def open_engine(url: str, search_path: str | None) -> AsyncEngine:
    kwargs: dict[str, Any] = {}
    if url.startswith("postgresql") and search_path:
        kwargs["connect_args"] = {"server_settings": {"search_path": search_path}}
    engine = create_async_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # The busy timeout comes first: switching a new file to WAL takes the database's lock, and a
    # connection without a timeout fails at once ("database is locked") when a replica starting beside
    # it holds that lock. WAL lets readers run beside a writer, and synchronous=NORMAL commits without an
    # fsync per transaction (a commit survives a crash of the process; a power cut may lose the last few).
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode")
    if cursor.fetchone()[0] != "wal":  # a file wal_ready did not see
        cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


async def wal_ready(url: str) -> None:
    """Switch a SQLite file to WAL before any engine connects to it (nothing to do for PostgreSQL).

    The switch needs the file's exclusive lock, and SQLite answers "database is locked" at once, without
    waiting out the busy timeout, when replicas starting together each try it on a new file. So it is
    done here, once per start, retried in a thread (never on the event loop) until one of them succeeds;
    WAL is then a property of the file, and the engine's connections find it set."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return
    await asyncio.to_thread(_switch_to_wal, parsed.database)


def _switch_to_wal(path: str) -> None:
    give_up = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as locked:
            if "locked" not in str(locked) or time.monotonic() > give_up:
                raise
        finally:
            db.close()
        time.sleep(0.02)


async def ping(engine: AsyncEngine) -> None:
    """Returns when the database answers a trivial statement; raises the driver's error when it does not."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
