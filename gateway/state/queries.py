"""Named queries (UHP Memories §6.4) as the gateway keeps them: one row per (memory, name).

Who may define or run one is the route's question (a grant); this module only stores them. Defining is an
upsert that two requests may race on: the update-or-insert runs in one transaction and an insert that
lost to a concurrent one is retried as a replace.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.state.query_schema import named_queries as table


class DefinitionRaced(Exception):
    """The query changed under both attempts to define it (a replace, then a new insert, each lost)."""


@dataclass(frozen=True)
class Definition:
    """What a definer states; `params` is the JSON Schema of a run's params, as JSON text."""

    description: str
    params: str
    requires: str  # read | write
    language: str
    body: str


@dataclass(frozen=True)
class NamedQuery:
    memory_id: str
    name: str
    description: str
    params: str
    requires: str
    language: str
    body: str
    created_by: str  # member ids
    created_at: int  # ms since the epoch
    updated_by: str
    updated_at: int


class NamedQueries:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def of_memory(self, memory_id: str) -> list[NamedQuery]:
        """The memory's named queries, by name."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(table).where(table.c.memory_id == memory_id).order_by(table.c.name))
            return [NamedQuery(**row._mapping) for row in rows]

    async def get(self, memory_id: str, name: str) -> NamedQuery | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(table).where(table.c.memory_id == memory_id,
                                                          table.c.name == name))).first()
        return NamedQuery(**row._mapping) if row is not None else None

    async def define(self, memory_id: str, name: str, what: Definition, by: str, at: int) -> bool:
        """Insert or replace; True when the name was new. Two definers racing on a new name both succeed,
        the later replacing the earlier, as two replaces would; DefinitionRaced if both passes lose."""
        values = {"description": what.description, "params": what.params, "requires": what.requires,
                  "language": what.language, "body": what.body, "updated_by": by, "updated_at": at}
        where = (table.c.memory_id == memory_id, table.c.name == name)
        for _ in range(2):
            try:
                async with self.engine.begin() as conn:
                    if (await conn.execute(update(table).where(*where).values(**values))).rowcount:
                        return False
                    await conn.execute(insert(table).values(memory_id=memory_id, name=name, created_by=by,
                                                            created_at=at, **values))
                    return True
            except IntegrityError:
                continue  # defined meanwhile by another request: replace it on the second pass
        raise DefinitionRaced(name)

    async def delete(self, memory_id: str, name: str) -> bool:
        async with self.engine.begin() as conn:
            done = await conn.execute(delete(table).where(table.c.memory_id == memory_id, table.c.name == name))
        return bool(done.rowcount)
