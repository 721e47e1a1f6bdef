"""Which records name which files: the file store's bytes go only when no record anywhere names them.

A file's owner may name it in records of several memories (and an import copies records with their file
parts into another memory), so erasing one record says nothing about the others, least of all those in
memories the eraser cannot see. One row per (file, memory, record) says a record names the file. A write
about to name files first *pins* them (rows under a token instead of a record id), in a transaction that
also finds each file still there, so an erasure running meanwhile either sees the pin and keeps the bytes
or has removed the file before the pin, which then fails; the write's record id replaces the token once
the provider has answered. A pin left behind (the write's outcome unknown) keeps the bytes: the safe side.

On the same `metadata` as gateway/state/schema.py and listed in gateway/state/tables.py, which is what
`StateStore.open` creates. Files attached before this table existed have no rows:
erasing a record that names one removes its bytes, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Column, Index, String, Table, delete, exists, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.state import schema as t

file_uses = Table(
    "file_uses",
    t.metadata,
    Column("file_id", String(64), primary_key=True),
    Column("memory_id", String(64), primary_key=True),
    Column("record_id", String(200), primary_key=True),  # or "pin:<token>" while a write is under way
)
Index("ix_file_uses_memory_record", file_uses.c.memory_id, file_uses.c.record_id)

PIN = "pin:"


class FileGone(Exception):
    """A file a write was about to name is no longer in the store (erased meanwhile)."""

    def __init__(self, file_id: str) -> None:
        super().__init__(file_id)
        self.file_id = file_id


async def _insert_new(conn: AsyncConnection, rows: list[dict[str, str]]) -> None:
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    await conn.execute(dialect.insert(file_uses).values(rows).on_conflict_do_nothing())


async def pin(engine: AsyncEngine, memory_id: str, file_ids: set[str], token: str) -> None:
    """Hold `file_ids` for a write into `memory_id`; FileGone if one is no longer stored."""
    ids = sorted(file_ids)
    async with engine.begin() as conn:
        # The rows first: in SQLite that takes the write lock, so an erasure cannot slip in between.
        await _insert_new(conn, [{"file_id": f, "memory_id": memory_id, "record_id": PIN + token} for f in ids])
        held = select(t.files.c.id).where(t.files.c.id.in_(ids)).with_for_update(read=True)
        found = set((await conn.execute(held)).scalars())
        for file_id in ids:
            if file_id not in found:
                raise FileGone(file_id)


async def settle(engine: AsyncEngine, memory_id: str, token: str | None, record_id: str,
                 file_ids: Iterable[str]) -> None:  # fmt: skip
    """`record_id` of `memory_id` names `file_ids` now; the pin under `token` (if given) goes with it."""
    async with engine.begin() as conn:
        await _insert_new(conn, [{"file_id": f, "memory_id": memory_id, "record_id": record_id}
                                 for f in sorted(set(file_ids))])  # fmt: skip
        if token is not None:
            await unpin_in(conn, memory_id, token)


async def unpin_in(conn: AsyncConnection, memory_id: str, token: str) -> None:
    u = file_uses.c
    await conn.execute(delete(file_uses).where(u.memory_id == memory_id, u.record_id == PIN + token))


async def unpin(engine: AsyncEngine, memory_id: str, token: str) -> None:
    """The write under `token` did not happen: its pin goes."""
    async with engine.begin() as conn:
        await unpin_in(conn, memory_id, token)


async def release(engine: AsyncEngine, memory_id: str, record_ids: Iterable[str], file_ids: Iterable[str]) -> list[str]:
    """The records `record_ids` of `memory_id` were erased: their rows go (and those under ids they had
    before their memory moved to another provider), and of `file_ids` those no record names any more are
    removed from the files table, in the same transaction. Returns them: their bytes may go now."""
    u, aliases = file_uses.c, t.record_aliases.c
    erased = sorted(set(record_ids))
    gone: list[str] = []
    async with engine.begin() as conn:
        for chunk in (erased[i : i + 500] for i in range(0, len(erased), 500)):
            older = select(aliases.old_id).where(aliases.memory_id == memory_id, aliases.new_id.in_(chunk))
            await conn.execute(delete(file_uses).where(
                u.memory_id == memory_id, u.record_id.in_(chunk) | u.record_id.in_(older)))
        for file_id in sorted(set(file_ids)):
            held = select(t.files.c.id).where(t.files.c.id == file_id).with_for_update()
            if (await conn.execute(held)).first() is None:
                continue
            if (await conn.execute(select(exists().where(u.file_id == file_id)))).scalar():
                continue  # another record, here or in any other memory, still names it
            await conn.execute(delete(t.files).where(t.files.c.id == file_id))
            gone.append(file_id)
    return gone
