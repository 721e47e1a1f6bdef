"""Rows of the tree's tables as the values the gateway holds, and back; plain row access for the others."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.state.tree import MemoryNode
from policies.access import PRIVILEGES, Grant


def privileges_text(privileges: frozenset[str]) -> str:
    return ",".join(p for p in PRIVILEGES if p in privileges)


def privileges_of_text(text: str) -> frozenset[str]:
    return frozenset(p for p in text.split(",") if p)


def node_of_row(row: Any) -> MemoryNode:
    return MemoryNode(row.id, row.name, row.description, row.parent_id, bool(row.restricted), row.provider,
                      row.created_by, row.created_at, row.updated_at)


def grant_of_row(row: Any) -> Grant:
    return Grant(row.id, row.memory_id, row.principal, privileges_of_text(row.privileges), bool(row.implicit))


def grant_row(grant: Grant, stamp: int) -> dict[str, Any]:
    return {
        "id": grant.id, "memory_id": grant.memory_id, "principal": grant.principal,
        "privileges": privileges_text(grant.privileges), "implicit": grant.implicit, "created_at": stamp,
    }


class Rows:
    """Insert, read and delete rows of a table by column equality, each in a transaction of its own."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def insert(self, table: Any, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(insert(table).values(**values))

    async def fetch_one(self, table: Any, **where: Any) -> Any:
        async with self.engine.connect() as conn:
            query = select(table).where(*(table.c[k] == v for k, v in where.items()))
            return (await conn.execute(query)).first()

    async def fetch_all(self, table: Any, order_by: Any = None, **where: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            query = select(table).where(*(table.c[k] == v for k, v in where.items()))
            if order_by is not None:
                query = query.order_by(order_by)
            return list(await conn.execute(query))

    async def delete_rows(self, table: Any, **where: Any) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(table).where(*(table.c[k] == v for k, v in where.items())))
        return int(result.rowcount or 0)
