"""A write to the embedded provider cancelled at any await (by the gateway's provider timeout, or a client
that went away) leaves every connection as it found it: no transaction left open, the writer's lock free,
and the next write and read work (issue 10 item 9).

The pool is inspected through the provider's own attributes (`_db`, `_readers`, `_lock`): "clean" is a
statement about them, and no answer of the public contract could show an idle transaction until the
next write fails.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from adapters.base import RecallQuery
from adapters.local import LocalProvider
from tests.adapters.harnesses import AGENT, M1, M2, Stamps


async def assert_clean(provider: LocalProvider, stamps: Stamps) -> None:
    """No connection of the pool is inside a transaction once what was handed to it has run, the writer's
    lock is free, and a write and the reads after it succeed."""
    assert not provider._lock.locked()
    async with provider._locked():
        pass  # the next holder of the writer's lock: it waits for a rollback a cancelled write left
    for db in (provider._db, *provider._readers):
        await db.execute("SELECT 1")  # behind anything still queued on that connection's thread
        assert not db.in_transaction
    written = await provider.remember(M2, stamps.record("Written after the cancelled call."))
    assert (await provider.get(M2, written.id)).id == written.id
    found = await provider.recall([M2], RecallQuery(text="cancelled", limit=5))
    assert written.id in [hit.record.id for hit in found.hits]
    await provider.erase(M2, [written.id])


async def test_a_write_timed_out_behind_another_connections_lock_does_not_wedge_the_provider(
    tmp_path: Path, stamps: Stamps
) -> None:
    """Another connection holds the file's write lock for longer than the provider timeout; the write
    waiting at BEGIN IMMEDIATE times out; once the lock is released, writes and reads succeed again."""
    path = tmp_path / "records.sqlite3"
    provider = await LocalProvider.open(path)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        kept = await provider.remember(M1, stamps.record("Written before the lock was taken."))
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(provider.remember(M1, stamps.record("Blocked by the lock.")), 0.3)
        holder.execute("ROLLBACK")
        for n in range(3):
            after = await provider.remember(M1, stamps.record(f"Written once the lock was released {n}."))
            assert (await provider.get(M1, after.id)).version == 1
        revised = await provider.revise(M1, kept.id, stamps.revision(title="Still revisable"))
        assert revised.version == 2
        await assert_clean(provider, stamps)
    finally:
        holder.close()
        await provider.close()


class CancelAt:
    """Stands in for the writer connection: at the `at`-th statement it cancels the task awaiting it,
    either once the statement was handed to SQLite's thread (it still runs there: the case that wedged
    the provider) or before it was handed over."""

    def __init__(self, db: aiosqlite.Connection, at: int, handed: bool) -> None:
        self._db = db
        self._at = at
        self._handed = handed
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    async def execute(self, *args: Any) -> Any:
        return await self._step(self._db.execute, *args)

    async def execute_fetchall(self, *args: Any) -> Any:
        return await self._step(self._db.execute_fetchall, *args)

    async def _step(self, method: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        self.calls += 1
        if self.calls != self._at:
            return await method(*args)
        task = asyncio.current_task()
        assert task is not None
        if not self._handed:
            task.cancel()
            await asyncio.sleep(0)

        async def run() -> Any:
            return await method(*args)

        handed = asyncio.ensure_future(run())
        await asyncio.sleep(0)  # the statement is now queued on the connection's thread
        task.cancel()
        return await handed


Operation = Callable[[LocalProvider, str, Stamps], Awaitable[Any]]


async def _remember(p: LocalProvider, record_id: str, s: Stamps) -> Any:
    return await p.remember(M1, s.record("A new record with its write id.", write_id="wr_" + "a" * 32))


async def _revise(p: LocalProvider, record_id: str, s: Stamps) -> Any:
    return await p.revise(M1, record_id, s.revision(title="Revised title", write_id="wr_" + "b" * 32))


async def _forget(p: LocalProvider, record_id: str, s: Stamps) -> Any:
    return await p.forget(M1, record_id, AGENT, s.tick(), write_id="wr_" + "c" * 32)


async def _erase(p: LocalProvider, record_id: str, s: Stamps) -> Any:
    return await p.erase(M1, [record_id])


@pytest.mark.parametrize("handed", [True, False], ids=["after_handover", "before_handover"])
@pytest.mark.parametrize("operation", [_remember, _revise, _forget, _erase], ids=lambda o: o.__name__[1:])
async def test_a_write_cancelled_at_each_await_leaves_every_connection_clean(
    tmp_path: Path, stamps: Stamps, operation: Operation, handed: bool
) -> None:
    """Cancel the write at its first, second, ... statement until it completes uncancelled; after each,
    the pool is clean and the write happened whole or not at all."""
    at = 1
    while True:
        provider = await LocalProvider.open(tmp_path / f"records-{at}.sqlite3")
        try:
            target = await provider.remember(M1, stamps.record("The record the write changes."))
            writer = provider._db
            proxy = CancelAt(writer, at, handed)
            provider._db = proxy  # type: ignore[assignment]
            try:
                await operation(provider, target.id, stamps)
                finished = True
            except asyncio.CancelledError:
                finished = False
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()  # the test's own task goes on
            finally:
                provider._db = writer
            # A statement handed over before the cancel still runs on the connection's thread, and its
            # rollback is queued behind it: the next writer waits for that (by design, the cancelled caller
            # does not). Reads wait too, or a COMMIT landing between the listing and the history read below
            # would show the record in one and not the other.
            await provider._settled()
            versions = [len(await provider.history(M1, r.id)) for r in (await provider.list(M1, include="all")).items]
            # Whole or not at all: one record with one or two versions, or two records (remember), or none (erase).
            assert versions in ([1], [2], [1, 1], []), versions
            await assert_clean(provider, stamps)
        finally:
            await provider.close()
        if finished:
            assert proxy.calls < at
            break
        at += 1
    assert at > 3  # every operation here awaits at least BEGIN, a statement and COMMIT
