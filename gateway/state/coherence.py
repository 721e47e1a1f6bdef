"""Many instances on one database, each deciding from the state as it is now.

Every instance keeps members, keys, groups, the tree and its grants in memory so that an access decision
costs no round trip. Another instance's change would stay invisible to it until a restart, so every
change is also written as a row of `state_changes`, in the transaction that makes it, and before each
decision (`StateStore.catch_up`, called where a request's credential is resolved) an instance asks the
database for the newest row (one indexed `max`) and, when it is past what it has applied, reloads the
entities those rows name. A change answered by any instance is therefore seen by every instance from its
next request on.

Rows must become visible in the order of their `seq`, or a reader could apply seq 6, move its mark past
5, and never see 5 committing later. PostgreSQL hands out sequence values at insert, not at commit, so
writers of change rows take one transaction-scoped advisory lock first: they commit one after another.
SQLite has one writer at a time already. A bulk change (a tree import) writes one row of kind "batch" per
slice of many entities, naming them in `change_batches`. Rows older than `KEEP_MS` are pruned; an instance that finds a
gap (its mark is older than every row left) reloads everything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.base.clock import now_ms
from gateway.base.ids import new_id
from gateway.state import schema as t
from gateway.state.directory import Directory
from gateway.state.rows import grant_of_row, node_of_row
from gateway.state.tree import Tree
from gateway.state.tree import refresh as refresh_tree

Kind = Literal["member", "keys", "group", "memberships", "memory", "grants"]
KINDS: tuple[Kind, ...] = ("member", "keys", "group", "memberships", "memory", "grants")

PRUNE_EVERY = 1000  # changes applied between two prunes of the log
KEEP_MS = 3_600_000  # an hour of changes: an instance further behind than that reloads everything
_CHANGES_LOCK_KEY = 0x6D656D666565  # beside tree_writes' key; pg_advisory_xact_lock takes a bigint


async def record(conn: AsyncConnection, kind: Kind, entities: Iterable[str]) -> None:
    """Note, inside the writing transaction, that these entities of `kind` changed."""
    stamp = now_ms()
    rows = [{"kind": kind, "entity": entity, "at": stamp} for entity in dict.fromkeys(entities)]
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CHANGES_LOCK_KEY})
    await conn.execute(insert(t.state_changes), rows)


async def record_batches(conn: AsyncConnection, batches: Iterable[dict[Kind, list[str]]]) -> tuple[int, int]:
    """Note many changes as one change row per batch (its entities in `change_batches`), and answer the
    newest seq before them and after them: an instance that had applied everything up to the first has
    nothing else to apply up to the second once it holds these changes itself."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CHANGES_LOCK_KEY})
    before = await latest(conn)
    stamp = now_ms()
    for batch in batches:
        batch_id = new_id("change")
        rows = [{"id": batch_id, "kind": kind, "entities": "\n".join(dict.fromkeys(ids)), "at": stamp}
                for kind, ids in batch.items() if ids]
        if rows:
            await conn.execute(insert(t.change_batches), rows)
            await conn.execute(insert(t.state_changes), [{"kind": "batch", "entity": batch_id, "at": stamp}])
    return before, await latest(conn)


async def latest(conn: AsyncConnection) -> int:
    found = (await conn.execute(select(func.max(t.state_changes.c.seq)))).scalar()
    return int(found or 0)


@dataclass
class Changes:
    """What changed after a mark: entity ids by kind, up to `upto`; `gap` when rows were pruned between."""

    upto: int
    entities: dict[Kind, set[str]] = field(default_factory=dict)
    gap: bool = False
    newest_at: int = 0  # when the newest of them was written (ms): its age when applied is the lag

    def of(self, kind: Kind) -> set[str]:
        return self.entities.get(kind, set())


async def since(conn: AsyncConnection, mark: int) -> Changes:
    c = t.state_changes.c
    rows = (await conn.execute(select(c.seq, c.kind, c.entity, c.at).where(c.seq > mark).order_by(c.seq))).all()
    if not rows:
        return Changes(mark)
    changes = Changes(int(rows[-1].seq), gap=int(rows[0].seq) > mark + 1 and await _pruned(conn, mark))
    changes.newest_at = max(int(row.at) for row in rows)
    batches: set[str] = set()
    for row in rows:
        if row.kind in KINDS:
            changes.entities.setdefault(row.kind, set()).add(row.entity)
        elif row.kind == "batch":
            batches.add(row.entity)
    for row in await rows_of(conn, t.change_batches, "id", batches):
        if row.kind in KINDS:
            changes.entities.setdefault(row.kind, set()).update(row.entities.split("\n"))
    return changes


async def _pruned(conn: AsyncConnection, mark: int) -> bool:
    """Whether the rows right after `mark` are gone (pruned) rather than never written (a rolled-back
    insert also leaves a hole in a sequence)."""
    oldest = (await conn.execute(select(func.min(t.state_changes.c.seq)))).scalar()
    return oldest is not None and int(oldest) > mark + 1


async def prune(conn: AsyncConnection) -> None:
    cutoff = now_ms() - KEEP_MS
    await conn.execute(delete(t.state_changes).where(t.state_changes.c.at < cutoff))
    await conn.execute(delete(t.change_batches).where(t.change_batches.c.at < cutoff))


class ChangeMark:
    """How far this instance has applied the change log, and the lock that applies one batch at a time."""

    def __init__(self) -> None:
        self.seen = 0
        # While this instance commits changes of its own that follow straight on `seen` (a bulk import,
        # under `lock`): the newest of them. A request meanwhile need not wait for them: they are not
        # answered yet, and the commit of a large one (with SQLite's checkpoint after it) takes seconds.
        self.committing = 0
        self.lock = asyncio.Lock()
        self.applied_at = 0  # when a batch was last applied: the age of what this instance holds is lag


async def rows_of(conn: AsyncConnection, table: Any, column: str, ids: set[str]) -> list[Any]:
    """The rows of `table` whose `column` is one of `ids`, fetched in chunks the databases accept."""
    found: list[Any] = []
    ordered = sorted(ids)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start:start + 500]
        found.extend((await conn.execute(select(table).where(table.c[column].in_(chunk)))).all())
    return found


@dataclass
class Fetched:
    """The rows, as they are now, of every entity a batch of changes names."""

    members: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, list[Any]] = field(default_factory=dict)
    groups: dict[str, Any] = field(default_factory=dict)
    group_members: dict[str, list[str]] = field(default_factory=dict)
    memberships: dict[str, list[str]] = field(default_factory=dict)
    memories: dict[str, Any] = field(default_factory=dict)
    grants: dict[str, list[Any]] = field(default_factory=dict)


async def fetch(conn: AsyncConnection, changes: Changes) -> Fetched:
    got = Fetched()
    for row in await rows_of(conn, t.members, "id", changes.of("member")):
        got.members[row.id] = row
    for row in await rows_of(conn, t.api_keys, "member_id", changes.of("keys")):
        got.keys.setdefault(row.member_id, []).append(row)
    for row in await rows_of(conn, t.groups, "id", changes.of("group")):
        got.groups[row.id] = row
    for row in await rows_of(conn, t.group_members, "group_id", changes.of("group")):
        got.group_members.setdefault(row.group_id, []).append(row.member_id)
    for row in await rows_of(conn, t.group_members, "member_id", changes.of("memberships")):
        got.memberships.setdefault(row.member_id, []).append(row.group_id)
    for row in await rows_of(conn, t.memories, "id", changes.of("memory")):
        got.memories[row.id] = row
    for row in await rows_of(conn, t.grants, "memory_id", changes.of("grants")):
        got.grants.setdefault(row.memory_id, []).append(row)
    return got


def apply(directory: Directory, tree: Tree, found: Changes, got: Fetched) -> None:
    """Replace what this instance holds about each changed entity with what its rows say now."""
    for member_id in found.of("member"):
        directory.refresh_member(member_id, got.members.get(member_id))
    for member_id in found.of("keys"):
        directory.refresh_keys(member_id, got.keys.get(member_id, []))
    for group_id in found.of("group"):
        directory.refresh_group(group_id, got.groups.get(group_id), got.group_members.get(group_id, []))
    for member_id in found.of("memberships"):
        directory.refresh_memberships(member_id, got.memberships.get(member_id, []))
    changed = found.of("memory")
    nodes = {memory_id: node_of_row(got.memories[memory_id]) for memory_id in changed if memory_id in got.memories}
    grants = {memory_id: [grant_of_row(row) for row in got.grants.get(memory_id, [])]
              for memory_id in found.of("grants")}
    refresh_tree(tree, nodes, changed - set(nodes), grants)
