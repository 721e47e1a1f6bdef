"""What a starting gateway does to the database once, whoever else starts at the same moment.

Replicas started together on an empty database each find no tables and no members: left alone, both
create the tables (one fails on the other's half-made catalogue rows) and both make a first admin. So the
schema and the first admin are made in one transaction that first takes a database-wide startup lock:
on PostgreSQL a transaction-scoped advisory lock keyed by the schema the tables live in, on SQLite the
database's single write lock. A replica that waits there finds, once it is let in, the tables made and the
admin there, and makes neither again.
"""

from __future__ import annotations

import secrets

from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.base.clock import now_ms
from gateway.base.ids import new_id
from gateway.state import coherence
from gateway.state import schema as t
from gateway.state.directory import KEY_PREFIX, hash_key

# pg_advisory_xact_lock(int, int): this constant and a hash of the schema, so gateways on other schemas of
# the same database do not wait for each other.
_STARTUP_LOCK = 0x6D656D66  # "memf"


async def hold_startup_lock(conn: AsyncConnection) -> None:
    """Make every other starting gateway on this database wait until this transaction ends."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key, hashtext(current_schema()))"),
                           {"key": _STARTUP_LOCK})
        return
    # SQLite: a write statement takes the database's write lock until the transaction ends (a second
    # starter waits on busy_timeout). The table exists for this alone; creating it is idempotent.
    await conn.execute(text("CREATE TABLE IF NOT EXISTS memfed_startup (id INTEGER PRIMARY KEY)"))
    await conn.execute(text("INSERT OR REPLACE INTO memfed_startup (id) VALUES (1)"))


async def make_first_admin(conn: AsyncConnection, given: str | None) -> tuple[str, str] | None:
    """On a database without members, the first admin and its key (`given`, or a new one): (member id, key
    secret). None when there are members already. Call it holding the startup lock, so that the count it
    reads is still true when it writes."""
    if (await conn.execute(select(func.count()).select_from(t.members))).scalar_one():
        return None
    member_id, stamp = new_id("member"), now_ms()
    secret = given or KEY_PREFIX + secrets.token_urlsafe(32)
    await conn.execute(insert(t.members).values(id=member_id, name="admin", type="human", is_admin=True,
                                                external_subject=None, created_at=stamp))
    await conn.execute(insert(t.api_keys).values(id=new_id("key"), member_id=member_id, key_hash=hash_key(secret),
                                                 created_at=stamp))
    await coherence.record(conn, "member", [member_id])
    await coherence.record(conn, "keys", [member_id])
    return member_id, secret
