"""Harnesses (§9) and what priming placed, as the gateway keeps them (tables: gateway/state/harness_schema.py).

A harness row holds only its two settings; what its agent may use is read off the grants every time
(policies/access.py `granted`), never copied here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.state.harness_schema import harnesses as table
from gateway.state.harness_schema import prime_log


@dataclass(frozen=True)
class Harness:
    id: str
    name: str
    agent_member_id: str
    default_memory_id: str | None
    observe: bool
    created_by: str  # member id
    created_at: int  # ms since the epoch
    updated_at: int


@dataclass(frozen=True)
class Placed:
    """What one prime placed from one memory, in tokens (§9.1); `harness_id` None at a memory's own route."""

    request_id: str
    harness_id: str | None
    memory_id: str
    principal: str
    tokens: int
    records: int
    budget: int
    tokenizer: str
    at: int


def _harness(row: Any) -> Harness:
    return Harness(row.id, row.name, row.agent_member_id, row.default_memory_id, bool(row.observe), row.created_by,
                   row.created_at, row.updated_at)


class Harnesses:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, harness: Harness) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(insert(table).values(
                id=harness.id, name=harness.name, agent_member_id=harness.agent_member_id,
                default_memory_id=harness.default_memory_id, observe=harness.observe,
                created_by=harness.created_by, created_at=harness.created_at, updated_at=harness.updated_at))

    async def get(self, harness_id: str) -> Harness | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(table).where(table.c.id == harness_id))).first()
        return _harness(row) if row is not None else None

    async def listed(self, agent_member_id: str | None = None) -> list[Harness]:
        """Oldest first; given `agent_member_id`, only that agent's."""
        query = select(table).order_by(table.c.created_at)
        if agent_member_id is not None:
            query = query.where(table.c.agent_member_id == agent_member_id)
        async with self.engine.connect() as conn:
            return [_harness(row) for row in await conn.execute(query)]

    async def change(self, harness_id: str, *, updated_at: int, default_memory_id: str | None = None,
                     set_default: bool = False, observe: bool | None = None) -> Harness | None:
        """Change the harness's settings and answer it as changed, in one transaction; None when it is gone."""
        values: dict[str, Any] = {"updated_at": updated_at}
        if set_default:
            values["default_memory_id"] = default_memory_id
        if observe is not None:
            values["observe"] = observe
        async with self.engine.begin() as conn:
            await conn.execute(update(table).where(table.c.id == harness_id).values(**values))
            row = (await conn.execute(select(table).where(table.c.id == harness_id))).first()
        return _harness(row) if row is not None else None

    async def delete(self, harness_id: str) -> bool:
        async with self.engine.begin() as conn:
            return bool((await conn.execute(delete(table).where(table.c.id == harness_id))).rowcount)


class PrimeLog:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def keep(self, placed: Sequence[Placed]) -> None:
        """One row per memory a prime placed records from, written together."""
        if not placed:
            return
        async with self.engine.begin() as conn:
            await conn.execute(insert(prime_log), [
                {"request_id": p.request_id, "harness_id": p.harness_id, "memory_id": p.memory_id,
                 "principal": p.principal, "tokens": p.tokens, "records": p.records, "budget": p.budget,
                 "tokenizer": p.tokenizer, "at": p.at} for p in placed])
