"""The statements behind an Idempotency-Key's row (`schema.idempotency_keys`): claim, take over, renew,
finish. Each is one transaction whose WHERE clause repeats what the caller saw, so two gateways that race
for one key never both win: the loser's statement matches no row and it reads the row again.

gateway/federation/idempotency.py decides what to do with a row; this module only reads and writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.state.schema import idempotency_keys as k

RUNNING, DONE, FAILED, UNKNOWN = "running", "done", "failed", "unknown"


@dataclass(frozen=True)
class KeyRow:
    principal: str
    key: str
    fingerprint: str
    state: str
    write_id: str
    owner: str
    lease_until: int
    unknown_since: int | None
    status: int | None
    body: str | None
    created_at: int


def _mine(principal: str, key: str, owner: str) -> ColumnElement[bool]:
    return and_(k.c.principal == principal, k.c.key == key, k.c.owner == owner)


async def claim(engine: AsyncEngine, principal: str, key: str, *, fingerprint: str, write_id: str, owner: str,
                lease_until: int, now: int) -> bool:
    """Insert the row as running and held by `owner`; False when the key has a row already."""
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(k).values(
                principal=principal, key=key, fingerprint=fingerprint, state=RUNNING, write_id=write_id,
                owner=owner, lease_until=lease_until, unknown_since=None, status=None, body=None, created_at=now))
    except IntegrityError:
        return False
    return True


async def read(engine: AsyncEngine, principal: str, key: str) -> KeyRow | None:
    async with engine.connect() as conn:
        row = (await conn.execute(select(k).where(k.c.principal == principal, k.c.key == key))).first()
    return KeyRow(**row._mapping) if row is not None else None


async def take_over(engine: AsyncEngine, seen: KeyRow, *, owner: str, lease_until: int) -> bool:
    """Hold a row that is failed, unknown, or running under a lease that ran out; False when it changed
    since it was read (another gateway took it, or its owner finished)."""
    async with engine.begin() as conn:
        taken = await conn.execute(
            update(k).where(_mine(seen.principal, seen.key, seen.owner), k.c.state == seen.state,
                            k.c.lease_until == seen.lease_until)
            .values(state=RUNNING, owner=owner, lease_until=lease_until))
    return bool(taken.rowcount)


async def forget_expired(engine: AsyncEngine, seen: KeyRow) -> None:
    """Drop a row kept past its time, unless it changed since it was read."""
    async with engine.begin() as conn:
        await conn.execute(delete(k).where(_mine(seen.principal, seen.key, seen.owner),
                                           k.c.created_at == seen.created_at, k.c.state == seen.state))


async def renew(engine: AsyncEngine, principal: str, key: str, *, owner: str, lease_until: int) -> bool:
    async with engine.begin() as conn:
        renewed = await conn.execute(update(k).where(_mine(principal, key, owner), k.c.state == RUNNING)
                                     .values(lease_until=lease_until))
    return bool(renewed.rowcount)


async def finish(engine: AsyncEngine, principal: str, key: str, *, owner: str, state: str,
                 status: int | None = None, body: str | None = None, unknown_since: int | None = None) -> bool:
    """Record how the owner's run ended; False when the row is no longer the owner's."""
    async with engine.begin() as conn:
        done = await conn.execute(update(k).where(_mine(principal, key, owner), k.c.state == RUNNING).values(
            state=state, status=status, body=body, unknown_since=unknown_since, lease_until=0))
    return bool(done.rowcount)
