"""The local provider's connections to its SQLite file: one writer behind a lock, a pool of readers.

`LocalConnections` opens the file (WAL, the schema, secure delete), hands out a connection for a read
that stands alone, for a run of statements under the lock, or for a write in one IMMEDIATE transaction,
and folds the write-ahead log back into the file. `LocalProvider` inherits it, as it inherits
`LocalQueries`; the records, their versions and recall are adapters/local/provider.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Self

import aiosqlite

from adapters.base import ProviderUnavailable
from adapters.local import _kept as kept
from adapters.local._schema import (
    FILL_WORDS,
    OLD_LIVE_INDEX,
    SCHEMA,
    SCHEMA_VERSION,
    WORDS_COLUMN,
    WORDS_INDEX,
    WRITE_ID_COLUMN,
    WRITE_ID_INDEX,
    fts_mean_length,
    fts_rows,
    fts_words,
)
from adapters.local._sql import CHECKPOINT, idf
from adapters.local._terms import terms_json

READERS = 2  # read connections beside the writer; the machines memfed targets have a few cores


class LocalConnections:
    """The writer, its lock and the reader pool of one SQLite file; a mixin of `LocalProvider`."""

    def __init__(self, db: aiosqlite.Connection, readers: Sequence[aiosqlite.Connection] = ()) -> None:
        self._db = db
        # Reads that stand alone (get, list, history, recall, count) go to their own connections, each
        # with its own thread: SQLite runs them in parallel with each other and with a write (WAL), so a
        # slow search does not hold up every other read behind it.
        self._readers = list(readers)
        self._next_reader = 0
        # Reads in progress on each reader: a connection runs its statements one after another, so a read
        # sent where a slow search (another member's) runs would wait behind it; it goes to the idlest.
        self._reading_now = [0] * len(self._readers)
        # aiosqlite runs one connection's statements on one thread, one at a time, so this lock costs no
        # parallelism; it keeps the statements of one operation (read current, close it, append the next)
        # from interleaving with another's, which would otherwise see or break a half-written chain.
        self._lock = asyncio.Lock()
        # The rollback a failed or cancelled write left queued on the writer (see `_writing`): whoever
        # takes the lock next waits for it first.
        self._cleanup: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout: float = 5.0) -> Self:
        """Open (creating if needed) the file at `path`; ":memory:" gives a private in-memory store.

        `busy_timeout` is how long a statement waits for another process holding the file (a backup,
        `memfed export`) before giving up.
        """
        if str(path) != ":memory:":
            await asyncio.to_thread(_private_file, Path(path))
        db = await aiosqlite.connect(str(path), isolation_level=None)
        try:
            db.row_factory = aiosqlite.Row
            await _functions(db)
            await db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA synchronous = NORMAL")
            # Erase promises the content cannot be read again: zero freed cells and pages instead of
            # leaving them in the file for anyone with the bytes.
            await db.execute("PRAGMA secure_delete = ON")
            made = (await (await db.execute("PRAGMA user_version")).fetchone() or (0,))[0]
            await db.executescript(SCHEMA)
            await _add_write_ids(db)
            await _add_words(db)
            if made < 4:
                await _count_terms(db)
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            await db.close()
            raise
        readers: list[aiosqlite.Connection] = []
        if str(path) != ":memory:":  # a private in-memory store cannot be shared between connections
            for _ in range(READERS):
                reader = await aiosqlite.connect(str(path), isolation_level=None)
                reader.row_factory = aiosqlite.Row
                await _functions(reader)
                await reader.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                await reader.execute("PRAGMA query_only = ON")
                readers.append(reader)
        return cls(db, readers)

    async def close(self) -> None:
        await self._settled()
        for reader in self._readers:
            await reader.close()
        await self._db.close()

    # ----------------------------------------------------------------------- connections

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[aiosqlite.Connection]:
        """A connection for a read that stands alone: a reader of the pool when there is one."""
        if not self._readers:
            async with self._locked() as db:
                yield db
            return
        count = len(self._readers)
        index = min(range(count), key=lambda i: (self._reading_now[i], (i - self._next_reader) % count))
        self._next_reader = index + 1
        self._reading_now[index] += 1
        try:
            yield self._readers[index]
        except sqlite3.Error as exc:
            raise ProviderUnavailable(f"local store: {exc}") from exc
        finally:
            self._reading_now[index] -= 1

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            try:
                await self._settled()
                yield self._db
            except sqlite3.Error as exc:
                # The file is this provider's vendor: a locked, full or damaged file is the vendor
                # failing, which the gateway reports as unavailable rather than as a bug.
                raise ProviderUnavailable(f"local store: {exc}") from exc

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._locked() as db:
            try:
                # IMMEDIATE takes the write lock up front, so two processes on one file wait rather than
                # fail halfway when both read first and then try to write.
                await db.execute("BEGIN IMMEDIATE")
                yield db
                await db.execute("COMMIT")
            except BaseException:
                # A cancelled await does not stop its statement: aiosqlite has handed it to the
                # connection's thread, where it still runs (a BEGIN IMMEDIATE waiting for another
                # process's lock begins once that lock is released). So the transaction's state cannot be
                # read here. A rollback is queued behind whatever was handed over and runs after it on
                # the same thread; it does nothing when no transaction is open (a failure that already
                # rolled back keeps its own error). The caller is not kept waiting for it (a timed-out
                # write answers at its timeout); the next holder of the lock waits instead.
                self._cleanup = asyncio.ensure_future(db.rollback())
                raise

    async def _settled(self) -> None:
        """Wait (shielded: a cancelled waiter leaves it for the next) for a failed write's rollback."""
        cleanup = self._cleanup
        if cleanup is None:
            return
        # The rollback's own failure is not this caller's: the write that left it reported its error.
        with contextlib.suppress(sqlite3.Error):
            await asyncio.shield(cleanup)
        if self._cleanup is cleanup:
            self._cleanup = None

    async def _checkpoint(self) -> bool:
        """Fold the write-ahead log into the file and empty it; False when a reader kept it from
        completing (the log, and that reader, still hold the old pages)."""
        async with self._locked() as db:
            rows = list(await db.execute_fetchall(CHECKPOINT))
        return not rows[0][0]


def _private_file(path: Path) -> None:
    """Create the records file (and missing directories) for the gateway's user alone, whatever the umask:
    SQLite gives its -wal and -shm files the mode of the database file."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    os.fchmod(fd, 0o600)
    os.close(fd)


async def _functions(db: aiosqlite.Connection) -> None:
    """The SQL functions the provider's statements call: a version's length off the word index, a word's
    weight in a memory (SQLite's own math functions are a compile-time option), the word index's own
    size and mean length, which recall needs to read a word's count back out of FTS5's bm25, and a
    version's distinct terms, which the counts kept on write add up."""
    await db.create_function("memfed_words", 1, fts_words, deterministic=True)
    await db.create_function("memfed_idf", 2, idf, deterministic=True)
    await db.create_function("memfed_fts_rows", 1, fts_rows, deterministic=True)
    await db.create_function("memfed_fts_avgdl", 1, fts_mean_length, deterministic=True)
    await db.create_function("memfed_terms", 2, terms_json, deterministic=True)


async def _add_words(db: aiosqlite.Connection) -> None:
    """A file from before per-memory ranking (schema version 2) gains each version's length, read off the
    word index once, and the index recall's statistics read; new files get the index here too."""
    columns = {row[1] for row in await db.execute_fetchall("PRAGMA table_info(versions)")}
    if "words" not in columns:
        await db.execute("BEGIN IMMEDIATE")
        try:
            await db.execute(WORDS_COLUMN)
            await db.execute(FILL_WORDS)
            await db.execute("COMMIT")
        except BaseException:
            await asyncio.shield(db.rollback())  # the connection is closed next: nothing else is queued
            raise
    await db.execute(WORDS_INDEX)
    await db.execute(OLD_LIVE_INDEX)


async def _count_terms(db: aiosqlite.Connection) -> None:
    """A file from before recall's kept counts (schema version 4), or a new one, gets them counted from its
    versions in one transaction (adapters/local/_kept.py); from then on every write keeps them."""
    await db.execute("BEGIN IMMEDIATE")
    try:
        for statement in kept.REFILL:
            await db.execute(statement)
        await db.execute("COMMIT")
    except BaseException:
        await asyncio.shield(db.rollback())  # the connection is closed next: nothing else is queued
        raise


async def _add_write_ids(db: aiosqlite.Connection) -> None:
    """A file from before write ids (schema version 1) gains their column and index; new files have both."""
    columns = {row[1] for row in await db.execute_fetchall("PRAGMA table_info(versions)")}
    if "write_id" not in columns:
        await db.execute(WRITE_ID_COLUMN)
    await db.execute(WRITE_ID_INDEX)
