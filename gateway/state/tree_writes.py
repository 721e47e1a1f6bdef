"""How the tree changes: one change at a time, checked against the rows inside the transaction that writes.

A check against the in-memory tree followed by an `await` and then a write is a race: two moves (X under
Y, Y under X) each pass their check before either lands, and the tree holds a cycle. So:

* `TreeLock` serializes the tree's changes in this process. A route holds it from its access checks to
  its write; the store's own methods take it too, and the task that holds it re-enters it.
* Inside the writing transaction the structure is checked again from the rows: the destination's chain
  of parents is read there, after `lock_tree` made every other tree writer on the database wait (on
  PostgreSQL a transaction-scoped advisory lock, on SQLite the database's write lock). Another gateway
  instance on the same database therefore takes its turn too, and its changes are seen even though this
  process's in-memory tree does not have them.
* `Claims` marks the subtree of a delete while its records are dropped at the providers (many awaits,
  without the lock): a memory being deleted takes no new child, move, grant or other change.
* `to_the_end` runs a transaction and the in-memory change that follows its commit to their end even
  when the caller is cancelled, so the database and the in-memory tree never disagree.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqlalchemy import Integer, inspect, literal, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.state import schema as t
from gateway.state.tree import MemoryNode, Tree
from gateway.state.tree_check import refuse_broken
from policies.access import MAX_DEPTH

T = TypeVar("T")

Refusal = Literal["not_found", "cycle", "too_deep", "busy"]

# One key for every tree writer on a PostgreSQL database (pg_advisory_xact_lock takes a bigint).
_TREE_LOCK_KEY = 0x6D656D666564  # "memfed"


class TreeRefused(Exception):
    """A tree change the rows (or a running delete) do not allow; nothing was written."""

    def __init__(self, kind: Refusal, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class TreeLock:
    """An asyncio lock that the task holding it may take again (a route, then the store method it calls)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        me = asyncio.current_task()
        if me is not None and self._owner is me:
            yield
            return
        async with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None

    def locked(self) -> bool:
        return self._lock.locked()


class Claims:
    """Memories whose delete is under way: their records are being dropped, and they take no change."""

    def __init__(self) -> None:
        self._deleting: set[str] = set()

    def claim(self, memory_ids: Iterable[str]) -> frozenset[str]:
        wanted = frozenset(memory_ids)
        if wanted & self._deleting:
            raise TreeRefused("busy", "A memory of this subtree is being deleted.")
        self._deleting |= wanted
        return wanted

    def release(self, memory_ids: Iterable[str]) -> None:
        self._deleting -= set(memory_ids)

    def deleting(self, memory_id: str) -> bool:
        return memory_id in self._deleting

    def refuse_if_deleting(self, *memory_ids: str | None) -> None:
        if any(m is not None and m in self._deleting for m in memory_ids):
            raise TreeRefused("busy", "This memory is being deleted.")


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` in a task of its own and wait for it, even through a cancellation of the caller (which is
    passed on once the work is done): a commit that landed in the database but not in the in-memory tree
    would make the two disagree until a restart, and the tree lock stays held until the work ends."""
    task = asyncio.get_running_loop().create_task(work)
    interrupted = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            interrupted = True
    if interrupted:
        if not task.cancelled():
            task.exception()  # seen, so that a failure of the work is not reported as never retrieved
        raise asyncio.CancelledError
    return task.result()


async def lock_tree(conn: AsyncConnection) -> None:
    """Make every other tree writer on this database wait until this transaction ends."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _TREE_LOCK_KEY})
    else:
        # SQLite has one write lock for the whole database; a write statement takes it even when it
        # changes no row, so the reads that follow see every committed change.
        await conn.execute(text("UPDATE memories SET id = id WHERE 0 = 1"))


async def chain_rows(conn: AsyncConnection, memory_id: str) -> list[str]:
    """The memory and its ancestors, from the rows, nearest first; empty when there is no such row.

    At most MAX_DEPTH + 2 ids, so that a chain too long (or a cycle) shows as one longer than allowed."""
    m = t.memories
    chain = (select(m.c.id, m.c.parent_id, literal(0, Integer).label("steps"))
             .where(m.c.id == memory_id).cte("chain", recursive=True))
    up = m.alias("up")
    chain = chain.union_all(
        select(up.c.id, up.c.parent_id, chain.c.steps + 1)
        .where(up.c.id == chain.c.parent_id, chain.c.steps <= MAX_DEPTH))
    rows = await conn.execute(select(chain.c.id).order_by(chain.c.steps))
    return [row.id for row in rows]


async def subtree_rows(conn: AsyncConnection, memory_id: str) -> dict[str, int]:
    """The memory and its descendants, from the rows: each id with its distance below `memory_id`
    (bounded by MAX_DEPTH + 1 levels, whatever the rows hold)."""
    m = t.memories
    below = (select(m.c.id, literal(0, Integer).label("steps"))
             .where(m.c.id == memory_id).cte("below", recursive=True))
    child = m.alias("child")
    below = below.union_all(
        select(child.c.id, below.c.steps + 1)
        .where(child.c.parent_id == below.c.id, below.c.steps <= MAX_DEPTH))
    found: dict[str, int] = {}
    for row in await conn.execute(select(below.c.id, below.c.steps)):
        found.setdefault(row.id, row.steps)
    return found


async def check_parent(conn: AsyncConnection, parent_id: str, *, moving: str | None = None) -> None:
    """Refuse a parent that is not a row, that lies in the subtree being moved, or that would put a
    memory (or the deepest one below the moved memory) deeper than MAX_DEPTH."""
    chain = await chain_rows(conn, parent_id)
    if not chain:
        raise TreeRefused("not_found", "No such memory.")
    if moving is not None and moving in chain:
        raise TreeRefused("cycle", "The new parent is this memory or one below it: that would make a cycle.")
    height = max((await subtree_rows(conn, moving)).values(), default=0) if moving is not None else 0
    if len(chain) + height > MAX_DEPTH:
        raise TreeRefused("too_deep", f"A memory may sit at most {MAX_DEPTH} levels below its root.")


async def row_exists(conn: AsyncConnection, memory_id: str) -> bool:
    found = await conn.execute(select(t.memories.c.id).where(t.memories.c.id == memory_id))
    return found.first() is not None


async def check_links(engine: AsyncEngine) -> None:
    """StateCorrupt when the rows' parent links are not a tree. Reads nothing else and makes nothing: a
    store not created yet holds no cycle."""
    if engine.dialect.name == "sqlite" and not await asyncio.to_thread(Path(engine.url.database or "").exists):
        return
    async with engine.connect() as conn:
        if not await conn.run_sync(lambda sync: inspect(sync).has_table(t.memories.name)):
            return
        tree = Tree()
        for row in await conn.execute(select(t.memories.c.id, t.memories.c.parent_id)):
            tree.put(MemoryNode(row.id, "", "", row.parent_id, False, "", "", 0, 0))
    refuse_broken(tree)
