"""What a migration has done, kept in the state store so that a rerun resumes; and the switch itself.

The switch of one memory is one transaction: its alias rows (old record id -> id at the new provider)
and its new `provider` commit together, and only then does the in-memory tree follow. A request that
reads the tree before that still goes to the old provider, which still holds every record.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.base.clock import now_ms
from gateway.state import coherence
from gateway.state import migration_schema as m
from gateway.state import schema as t
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode

UNFINISHED = ("running", "failed")
FLUSH_EVERY = 200


@dataclass(frozen=True)
class Copied:
    """A source record whose first version is at the target: its id there, the last version copied."""

    new_id: str
    source_version: int


async def write_aliases(conn: AsyncConnection, memory_id: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Make each old id resolve to its new id. An id that was itself an alias's target (the record was
    moved before) is followed through too, so every id a client ever saw resolves in one step."""
    if not pairs:
        return
    rows = [{"m": memory_id, "old": old, "new": new} for old, new in pairs]
    a = t.record_aliases
    await conn.execute(
        update(a).where(and_(a.c.memory_id == bindparam("m"), a.c.new_id == bindparam("old")))
        .values(new_id=bindparam("new")),
        rows,
    )
    await conn.execute(delete(a).where(and_(a.c.memory_id == bindparam("m"), a.c.old_id == bindparam("old"))),
                       rows)
    await conn.execute(insert(a), [{"memory_id": memory_id, "old_id": old, "new_id": new} for old, new in pairs])


class MigrationLog:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._pending: dict[tuple[str, str, str], tuple[str, int]] = {}

    async def open(self, memory_id: str, target: str, recursive: bool) -> tuple[Any, bool]:
        """The migration of `memory_id` to `target` that did not finish, resumed; or a new one. An
        unfinished one to another target is abandoned: its copies there are cleared when a migration
        to that target starts again."""
        async with self.store.engine.begin() as conn:
            rows = list(await conn.execute(
                select(m.migrations).where(m.migrations.c.memory_id == memory_id,
                                           m.migrations.c.status.in_(UNFINISHED))
                .order_by(m.migrations.c.started_at.desc())))
            resumed = next((r for r in rows if r.target == target), None)
            stale = [r.id for r in rows if resumed is None or r.id != resumed.id]
            if stale:
                await conn.execute(update(m.migrations).where(m.migrations.c.id.in_(stale))
                                   .values(status="abandoned", finished_at=now_ms()))
            if resumed is not None:
                await conn.execute(update(m.migrations).where(m.migrations.c.id == resumed.id)
                                   .values(status="running", error="", recursive=recursive, finished_at=None))
                migration_id = resumed.id
            else:
                # gateway/base/ids.py has no kind for migrations; the prefix follows its pattern.
                migration_id = "mig_" + secrets.token_hex(16)
                await conn.execute(insert(m.migrations).values(
                    id=migration_id, memory_id=memory_id, target=target, recursive=recursive, status="running",
                    started_at=now_ms(), finished_at=None, copied=0, error=""))
            row = (await conn.execute(select(m.migrations).where(m.migrations.c.id == migration_id))).one()
        return row, resumed is not None

    async def copied(self, migration_id: str) -> dict[tuple[str, str], Copied]:
        await self.flush()
        rows = await self.store.rows.fetch_all(m.migration_records, migration_id=migration_id)
        return {(r.memory_id, r.old_id): Copied(r.new_id, r.source_version) for r in rows}

    async def note(self, migration_id: str, memory_id: str, old_id: str, new_id: str, version: int) -> None:
        """The target holds `old_id` as `new_id` up to source version `version`. Kept in memory and
        written a batch at a time: one transaction per version would cost more than the copy itself.
        A batch lost with the process costs nothing but time, since a rerun asks the target what it
        holds (and adopts copies the log does not know)."""
        self._pending[(migration_id, memory_id, old_id)] = (new_id, version)
        if len(self._pending) >= FLUSH_EVERY:
            await self.flush()

    async def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        c = m.migration_records.c
        async with self.store.engine.begin() as conn:
            await conn.execute(
                delete(m.migration_records).where(and_(c.migration_id == bindparam("k_mig"),
                                                       c.memory_id == bindparam("k_mem"),
                                                       c.old_id == bindparam("k_old"))),
                [{"k_mig": mig, "k_mem": mem, "k_old": old} for mig, mem, old in pending])
            await conn.execute(insert(m.migration_records), [
                {"migration_id": mig, "memory_id": mem, "old_id": old, "new_id": new, "source_version": version}
                for (mig, mem, old), (new, version) in pending.items()])

    async def dropped(self, migration_id: str, memory_id: str, old_ids: Iterable[str]) -> None:
        """Records erased at the source while the migration ran: their copies were erased too."""
        await self.flush()
        async with self.store.engine.begin() as conn:
            for old_id in old_ids:
                await conn.execute(delete(m.migration_records).where(*_record_key(migration_id, memory_id, old_id)))

    async def finish(self, migration_id: str, status: str, copied: int, error: str = "") -> Any:
        await self.flush()
        async with self.store.engine.begin() as conn:
            await conn.execute(update(m.migrations).where(m.migrations.c.id == migration_id).values(
                status=status, copied=copied, error=error[:2000], finished_at=now_ms()))
            return (await conn.execute(select(m.migrations).where(m.migrations.c.id == migration_id))).one()

    async def switch(self, memory_id: str, provider: str, pairs: Sequence[tuple[str, str]]) -> MemoryNode:
        """Aliases and the new binding in one transaction, then the tree."""
        stamp = now_ms()
        async with self.store.engine.begin() as conn:
            await write_aliases(conn, memory_id, pairs)
            await conn.execute(update(t.memories).where(t.memories.c.id == memory_id)
                               .values(provider=provider, updated_at=stamp))
            await coherence.record(conn, "memory", [memory_id])
        return self.store.tree.update(memory_id, provider=provider, updated_at=stamp)

    async def add_aliases(self, memory_id: str, pairs: Sequence[tuple[str, str]]) -> None:
        async with self.store.engine.begin() as conn:
            await write_aliases(conn, memory_id, pairs)


def _record_key(migration_id: str, memory_id: str, old_id: str) -> tuple[Any, ...]:
    c = m.migration_records.c
    return (c.migration_id == migration_id, c.memory_id == memory_id, c.old_id == old_id)
