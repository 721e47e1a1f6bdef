"""What the gateway keeps about records it does not hold: named instants (snapshots) and old record ids.

A snapshot names an instant of one memory, read back with `as_of`; an alias maps the id a record had
before a provider swap to the one the new provider gave it, so old ids keep working. Both are the
gateway's rows, whatever provider holds the records.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.state import schema as t


@dataclass(frozen=True)
class Snapshot:
    id: str
    memory_id: str
    name: str
    message: str
    at: int  # ms since the epoch
    created_by: str  # member id


class Snapshots:
    """The snapshots of each memory; a name is unique within its memory."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, snapshot: Snapshot) -> bool:
        """Keep `snapshot`; False when its memory has one of that name already (decided by the unique
        constraint inside the insert, so two requests racing on one name cannot both succeed)."""
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(t.snapshots).values(
                    id=snapshot.id, memory_id=snapshot.memory_id, name=snapshot.name, message=snapshot.message,
                    at=snapshot.at, created_by=snapshot.created_by))
        except IntegrityError:
            return False
        return True

    async def named(self, memory_id: str, name: str) -> Snapshot | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(t.snapshots).where(
                t.snapshots.c.memory_id == memory_id, t.snapshots.c.name == name))).first()
        return Snapshot(**row._mapping) if row is not None else None

    async def of_memory(self, memory_id: str) -> list[Snapshot]:
        """Oldest first."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(t.snapshots).where(t.snapshots.c.memory_id == memory_id)
                                      .order_by(t.snapshots.c.at))
            return [Snapshot(**row._mapping) for row in rows]


class RecordAliases:
    """Old record id -> current record id, per memory, written by a provider swap."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def current_id(self, memory_id: str, old_id: str) -> str | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(t.record_aliases.c.new_id).where(
                t.record_aliases.c.memory_id == memory_id, t.record_aliases.c.old_id == old_id))).first()
        return row.new_id if row is not None else None
