"""A big state store for bench/scale.py, written by direct bulk SQL into memfed's own tables.

Going through the API would take longer than what the bench measures; the rows are exactly what the
gateway writes (a memory, its creator's implicit grant of all four privileges), with the ids it makes.

The tree: one root; under it `BRANCHES` branches of `BRANCHES` sub-branches each, the rest of the memories
spread below those (leaves), and beside them one parent holding a tenth of all memories (the big fan-out a
`?parent=` page walks). One sub-branch in a hundred is restricted. The admin made every memory; a member
holds `grants` read grants on sub-branches and leaves picked at random.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import create_engine

from gateway.base.ids import new_id
from gateway.state import schema as t
from gateway.state.directory import hash_key

ADMIN_KEY = "mf_bench_scale_admin_key_0123456789abcdef"
MEMBER_KEY = "mf_bench_scale_member_key_0123456789abcdef"
BRANCHES = 100
ALL = "read,write,create,delete"


@dataclass(frozen=True)
class Seeded:
    root: str
    big_parent: str
    admin_id: str
    member_id: str
    memories: int
    grants: int


def _memories(count: int, admin: str, rng: random.Random) -> Iterator[tuple[object, ...]]:
    """Rows of `memories`, parents before children; the ids of the root and the big parent come first."""
    stamp = 1_700_000_000_000
    root = new_id("memory")
    big = new_id("memory")
    yield (root, "root", "", None, False, "local", admin, stamp, stamp)
    yield (big, "big", "the big fan-out parent", root, False, "local", admin, stamp + 1, stamp + 1)
    made = 2
    branches: list[str] = []
    for _ in range(min(BRANCHES, count - made)):
        memory_id = new_id("memory")
        branches.append(memory_id)
        made += 1
        yield (memory_id, f"branch {made}", "", root, False, "local", admin, stamp + made, stamp + made)
    subs: list[str] = []
    for branch in branches:
        for _ in range(BRANCHES):
            if made >= count:
                break
            memory_id = new_id("memory")
            subs.append(memory_id)
            made += 1
            yield (memory_id, f"sub {made}", "", branch, rng.random() < 0.01, "local", admin, stamp + made,
                   stamp + made)
    fan_out = count // 10
    for _ in range(min(fan_out, count - made)):
        made += 1
        yield (new_id("memory"), f"customer {made}", "one customer", big, False, "local", admin, stamp + made,
               stamp + made)
    parents = subs or branches or [root]
    while made < count:
        made += 1
        yield (new_id("memory"), f"leaf {made}", "a leaf memory", rng.choice(parents), False, "local", admin,
               stamp + made, stamp + made)


def seed_sqlite(path: str, memories: int, grants: int, seed: int = 1) -> Seeded:
    """A fresh SQLite state store at `path` (created by memfed's own schema) holding the tree."""
    engine = create_engine(f"sqlite:///{path}")
    t.metadata.create_all(engine)
    engine.dispose()
    db = sqlite3.connect(path)
    try:
        return _fill(db, memories, grants, seed)
    finally:
        db.close()


def _fill(db: sqlite3.Connection, memories: int, grants: int, seed: int) -> Seeded:
    rng = random.Random(seed)
    admin, member = new_id("member"), new_id("member")
    stamp = 1_700_000_000_000
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.executemany("INSERT INTO members (id, name, type, is_admin, external_subject, created_at) VALUES (?,?,?,?,?,?)",
                   [(admin, "admin", "human", True, None, stamp), (member, "many", "human", False, None, stamp)])
    db.executemany("INSERT INTO api_keys (id, member_id, key_hash, created_at) VALUES (?,?,?,?)",
                   [(new_id("key"), admin, hash_key(ADMIN_KEY), stamp),
                    (new_id("key"), member, hash_key(MEMBER_KEY), stamp)])
    ids: list[str] = []
    batch: list[tuple[object, ...]] = []
    for row in _memories(memories, admin, rng):
        batch.append(row)
        ids.append(str(row[0]))
        if len(batch) == 50_000:
            _insert_memories(db, batch, admin)
            batch = []
    _insert_memories(db, batch, admin)
    root, big = ids[0], ids[1]
    picked = rng.sample(ids[2 + BRANCHES:] or ids, min(grants, max(0, len(ids) - 2 - BRANCHES)) or 0)
    db.executemany("INSERT INTO grants (id, memory_id, principal, privileges, implicit, created_at) "
                   "VALUES (?,?,?,?,?,?)",
                   [(new_id("grant"), m, f"member:{member}", "read", False, stamp) for m in picked])
    db.commit()
    return Seeded(root, big, admin, member, len(ids), len(ids) + len(picked))


def _insert_memories(db: sqlite3.Connection, batch: list[tuple[object, ...]], admin: str) -> None:
    db.executemany("INSERT INTO memories (id, name, description, parent_id, restricted, provider, created_by, "
                   "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)", batch)
    db.executemany("INSERT INTO grants (id, memory_id, principal, privileges, implicit, created_at) "
                   "VALUES (?,?,?,?,?,?)",
                   [(new_id("grant"), row[0], f"member:{admin}", ALL, True, row[7]) for row in batch])


async def seed_postgres(url: str, schema: str, memories: int, grants: int, seed: int = 1) -> Seeded:
    """The same rows in a fresh PostgreSQL schema, by COPY."""
    import asyncpg  # only with --postgres

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE; CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        from sqlalchemy.dialects import postgresql
        from sqlalchemy.schema import CreateIndex, CreateTable

        for table in t.metadata.sorted_tables:
            await conn.execute(str(CreateTable(table).compile(dialect=postgresql.dialect())))
            for index in table.indexes:
                await conn.execute(str(CreateIndex(index).compile(dialect=postgresql.dialect())))
        rng = random.Random(seed)
        admin, member = new_id("member"), new_id("member")
        stamp = 1_700_000_000_000
        await conn.copy_records_to_table("members", records=[
            (admin, "admin", "human", True, None, stamp), (member, "many", "human", False, None, stamp)],
            columns=["id", "name", "type", "is_admin", "external_subject", "created_at"])
        await conn.copy_records_to_table("api_keys", records=[
            (new_id("key"), admin, hash_key(ADMIN_KEY), stamp), (new_id("key"), member, hash_key(MEMBER_KEY), stamp)],
            columns=["id", "member_id", "key_hash", "created_at"])
        rows = list(_memories(memories, admin, rng))
        columns = ["id", "name", "description", "parent_id", "restricted", "provider", "created_by", "created_at",
                   "updated_at"]
        await conn.copy_records_to_table("memories", records=rows, columns=columns)
        ids = [str(r[0]) for r in rows]
        picked = rng.sample(ids[2 + BRANCHES:], min(grants, max(0, len(ids) - 2 - BRANCHES)))
        grant_rows = [(new_id("grant"), r[0], f"member:{admin}", ALL, True, r[7]) for r in rows]
        grant_rows += [(new_id("grant"), m, f"member:{member}", "read", False, stamp) for m in picked]
        await conn.copy_records_to_table("grants", records=grant_rows, columns=[
            "id", "memory_id", "principal", "privileges", "implicit", "created_at"])
        return Seeded(ids[0], ids[1], admin, member, len(ids), len(grant_rows))
    finally:
        await conn.close()
