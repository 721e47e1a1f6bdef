"""Writing a bulk tree import: every memory and grant of it in one transaction, or none of them.

The lines were checked against the in-memory tree as they streamed in (gateway/api/tree_import.py). The
tree may have changed since, here or on another instance, so under the tree lock and inside the writing
transaction (after `lock_tree`) each anchor (an existing memory the import hangs memories below) is
checked again from the rows: it is still there, and the levels the import adds below it stay within
MAX_DEPTH; each existing memory given a grant is still there; no id a line gave was taken meanwhile.

Rows go in with executemany batches; the change log gets one row per slice of BATCH memories
(coherence.record_batches), written last so that the change log's own lock is held only for the commit.
After the commit the in-memory tree takes the nodes, a chunk at a time so that the event loop keeps
answering, each memory with its grants: a request meanwhile sees the tree between two chunks, never a
memory without its grants. Requests do not wait for the whole import (this instance's change mark moves
past the import's own rows at the commit); `changes.lock` stays held, so a later change of another
instance is applied after the import, never into the middle of it.

Cancellation: the writing runs in a task of its own. A cancelled caller sets `abandoned`; the task looks
at it between batches, before the commit, and rolls back. Once the commit is under way it runs to its end
(the tree then takes every node), like every tree write (tree_writes.to_the_end).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.state import coherence, tree_writes
from gateway.state import schema as t
from gateway.state.engine import chunks
from gateway.state.rows import grant_row
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode
from policies.access import MAX_DEPTH, Grant

BATCH = 10_000  # memories a change row (and an executemany) covers
_YIELD_EVERY = 500  # in-memory puts between two turns of the event loop: a few milliseconds
BULK_CACHE_KIB = 128 * 1024  # SQLite's page cache while an import writes (see _bulk_cache)

Progress = Callable[[int, int], None]  # (rows written, rows to write)
ImportProblem = Literal["not_found", "too_deep", "taken", "busy", "abandoned"]


class ImportRefused(Exception):
    """The rows refuse the import (or its caller went away before the commit): nothing was written."""

    def __init__(self, kind: ImportProblem, message: str, memory_id: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.memory_id = memory_id


@dataclass
class TreePlan:
    """What an import writes, as checked line by line."""

    nodes: list[MemoryNode] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)  # existing memory -> levels the import adds below
    grant_targets: set[str] = field(default_factory=set)  # existing memories the import grants on
    given_ids: list[str] = field(default_factory=list)  # ids the lines chose (minted ones cannot clash)
    stamp: int = 0
    committed: bool = False  # set once the transaction committed (what a failure after it must say)

    @property
    def rows(self) -> int:
        return len(self.nodes) + len(self.grants)


async def write_plan(store: StateStore, plan: TreePlan, progress: Progress,
                     recheck: Callable[[], None] = lambda: None) -> None:
    """Write the plan under the tree lock; `recheck` runs first under the lock (the caller's privileges
    decided again against the tree as it is now). ImportRefused when the rows refuse it."""
    async with store.tree_lock.held():
        busy = next((m for m in [*plan.anchors, *plan.grant_targets] if store.claims.deleting(m)), None)
        if busy is not None:
            raise ImportRefused("busy", "A memory the import writes below or grants on is being deleted.", busy)
        recheck()
        abandoned = asyncio.Event()
        task = asyncio.get_running_loop().create_task(_write(store, plan, progress, abandoned))
        interrupted = False
        while not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                interrupted = True
                abandoned.set()
        if interrupted:
            if not task.cancelled():
                task.exception()  # seen: a refusal of the rows is not reported as never retrieved
            raise asyncio.CancelledError
        task.result()


async def _write(store: StateStore, plan: TreePlan, progress: Progress, abandoned: asyncio.Event) -> None:
    async with store.engine.begin() as conn:
        await _write_in(store, conn, plan, progress, abandoned)


@contextlib.asynccontextmanager
async def _bulk_cache(conn: AsyncConnection) -> AsyncIterator[None]:
    """On SQLite, a page cache of BULK_CACHE_KIB for this connection while the import writes, then its own
    again. Each memory's row goes into the id index at a random place (ids are random): with SQLite's
    2 MB cache nearly every insert met a page that had been written out. 1,000,000 rows into a
    fresh state store (bench of the rows alone): 44 s, 19 s of CPU, against 25 s, 11 s with 128 MiB."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = (await conn.exec_driver_sql("PRAGMA cache_size")).scalar()
    await conn.exec_driver_sql(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        # The connection goes back to the pool: with its own cache again (a failure here, on a connection
        # that broke, must not hide the one that broke it).
        with contextlib.suppress(SQLAlchemyError):
            await conn.exec_driver_sql(f"PRAGMA cache_size={int(before or -2000)}")
            await conn.exec_driver_sql("PRAGMA shrink_memory")  # the pages past the cache, freed now


async def _write_in(store: StateStore, conn: AsyncConnection, plan: TreePlan, progress: Progress,
                    abandoned: asyncio.Event) -> None:
    total, done = plan.rows, 0
    progress(0, total)
    await tree_writes.lock_tree(conn)
    await _check_rows(conn, plan)
    async with _bulk_cache(conn):
        for start in range(0, len(plan.nodes), BATCH):
            _stop_if(abandoned)
            batch = plan.nodes[start:start + BATCH]
            await insert_rows(conn, t.memories, [_memory_row(node) for node in batch])
            done += len(batch)
            progress(done, total)
        for start in range(0, len(plan.grants), BATCH):
            _stop_if(abandoned)
            grants = plan.grants[start:start + BATCH]
            await insert_rows(conn, t.grants, [_grant_row(grant, plan.stamp) for grant in grants])
            done += len(grants)
            progress(done, total)
    _stop_if(abandoned)
    granted = list(dict.fromkeys(grant.memory_id for grant in plan.grants))
    async with store.changes.lock:  # no catch-up of this instance between the commit and the tree
        before, after = await coherence.record_batches(conn, _batches(plan.nodes, granted))
        # This instance held everything before: the rows up to `after` are this import's, which the tree
        # takes below a chunk at a time. Requests meanwhile (from the commit on, which with SQLite's
        # checkpoint after it takes seconds) need not wait for all of it: each sees the tree between two
        # chunks. One that needs a later change of another instance still waits for the lock, and that
        # change is applied after the import is in.
        own = store.changes.seen == before
        if own:
            store.changes.committing = after
        try:
            await conn.commit()
        finally:
            store.changes.committing = 0
        plan.committed = True
        if own:
            store.changes.seen = after
        await _apply(store, plan)


async def insert_rows(conn: AsyncConnection, table: Table, rows: list[tuple[Any, ...]]) -> None:
    """Insert rows given as tuples in the table's column order, by the driver's own bulk path: COPY on
    PostgreSQL, executemany on SQLite. Measured for 100,000 memories (bench/scale_import.py's rows), 6.1 s
    through SQLAlchemy's executemany against 1.6 s by COPY on PostgreSQL, 2.5 s against 1.3 s on SQLite:
    SQLAlchemy's per-row parameter processing is most of the cost at this size."""
    if not rows:
        return
    names = [column.name for column in table.columns]
    if conn.dialect.name == "postgresql":
        raw = await conn.get_raw_connection()  # the connection of this transaction, inside it
        driver: Any = raw.driver_connection  # asyncpg's own connection
        await driver.copy_records_to_table(table.name, records=rows, columns=names)
        return
    statement = insert(table).compile(dialect=conn.dialect)  # every column, in the table's order
    await conn.exec_driver_sql(str(statement), rows)


# _memory_row writes a node's fields in the table's column order; a change to either must change it too.
if [column.name for column in t.memories.columns] != list(MemoryNode.__dataclass_fields__):
    raise RuntimeError("gateway/state/tree_import.py: the memories table and MemoryNode list different fields")


def _memory_row(node: MemoryNode) -> tuple[Any, ...]:
    return (node.id, node.name, node.description, node.parent_id, node.restricted, node.provider,
            node.created_by, node.created_at, node.updated_at)


def _grant_row(grant: Grant, stamp: int) -> tuple[Any, ...]:
    row = grant_row(grant, stamp)
    return tuple(row[column.name] for column in t.grants.columns)


def _stop_if(abandoned: asyncio.Event) -> None:
    if abandoned.is_set():
        raise ImportRefused("abandoned", "The import was cancelled before it was committed; nothing was written.")


async def _check_rows(conn: AsyncConnection, plan: TreePlan) -> None:
    for anchor, below in plan.anchors.items():
        chain = await tree_writes.chain_rows(conn, anchor)
        if not chain:
            raise ImportRefused("not_found", "A memory the import writes below was deleted meanwhile.", anchor)
        if len(chain) - 1 + below > MAX_DEPTH:
            raise ImportRefused("too_deep", f"A memory may sit at most {MAX_DEPTH} levels below its root; the "
                                "memory the import writes below was moved deeper meanwhile.", anchor)
    for memory_id in plan.grant_targets:
        if not await tree_writes.row_exists(conn, memory_id):
            raise ImportRefused("not_found", "A memory the import grants on was deleted meanwhile.", memory_id)
    for chunk in chunks(plan.given_ids, 500):
        taken = (await conn.execute(select(t.memories.c.id).where(t.memories.c.id.in_(chunk)))).first()
        if taken is not None:
            raise ImportRefused("taken", f"The id {taken.id!r} was taken meanwhile.", taken.id)


def _batches(nodes: Sequence[MemoryNode], granted: list[str]) -> Iterator[dict[coherence.Kind, list[str]]]:
    """One change row per BATCH memories; the memories whose grants changed ride on the first rows. Made
    one at a time as they are written (a list of a million ids made at once held the loop)."""
    for start in range(0, max(len(nodes), len(granted)), BATCH):
        yield {"memory": [n.id for n in nodes[start:start + BATCH]], "grants": granted[start:start + BATCH]}


async def _apply(store: StateStore, plan: TreePlan) -> None:
    """Put the plan into the in-memory tree, a chunk of `_YIELD_EVERY` memories at a time with the grants
    on them, so that between two chunks the loop serves others and what they see is whole: a memory
    with its grants and its parent (lines name earlier lines as parents), or not yet there. The grants
    on memories that existed before go in last, in chunks too."""
    tree = store.tree
    on_new: dict[str, list[Grant]] = {}
    on_existing: list[Grant] = []
    for count, grant in enumerate(plan.grants, start=1):
        if grant.memory_id in plan.grant_targets:
            on_existing.append(grant)
        else:
            on_new.setdefault(grant.memory_id, []).append(grant)
        if count % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
    for start in range(0, len(plan.nodes), _YIELD_EVERY):
        for node in plan.nodes[start:start + _YIELD_EVERY]:
            tree.put(node)
            for grant in on_new.pop(node.id, ()):
                tree.add_grant(grant)
        await asyncio.sleep(0)
    for start in range(0, len(on_existing), _YIELD_EVERY):
        for grant in on_existing[start:start + _YIELD_EVERY]:
            tree.add_grant(grant)
        await asyncio.sleep(0)
