"""Loading the tree from the state store in chunks that let the event loop run in between.

At a million memories a load is seconds of work. Done in one go it would hold the loop, and the port
(bound before the load: gateway/server/serve.py) could not even answer its probes. Rows are streamed a
chunk at a time, and between chunks, between the sorting of sibling lists and between the steps of the
check that the links form a tree, the loop serves what waits (probes, and 503s to the rest).

`LoadProgress` is what readiness shows meanwhile: a share, not counts (the probe needs no credentials).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.state import schema as t
from gateway.state.rows import privileges_of_text
from gateway.state.tree import Tree
from gateway.state.tree_check import broken_tree_error

CHUNK = 500  # rows turned into nodes between two yields: 2-4 ms of CPU (1,000 gave steps up to 16 ms at 1M)


@dataclass
class LoadProgress:
    """How far the load of the tree is: memories and grants read, of how many."""

    done: int = 0
    total: int = 0

    def percent(self) -> int:
        if self.total <= 0:
            return 0
        return min(99, self.done * 100 // self.total)  # 100 is said by readiness turning ready


async def fetched_ahead(parts: AsyncIterator[Sequence[Any]]) -> AsyncGenerator[Sequence[Any], None]:
    """The chunks of `parts`, the next one asked for before the current one is handed out: the driver reads
    it (in its thread, or from the server) while this one is turned into nodes, instead of after. Use it under
    `contextlib.aclosing`: a consumer stopped midway must cancel the read ahead before the connection goes."""
    pending: asyncio.Task[Sequence[Any]] = asyncio.ensure_future(anext(parts))
    try:
        while True:
            try:
                part = await pending
            except StopAsyncIteration:
                return
            pending = asyncio.ensure_future(anext(parts))
            await asyncio.sleep(0)  # lets the next ask reach the driver before this chunk holds the loop
            yield part
    finally:
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending


def memories_in_key_order() -> Select[Any]:
    """Every memory row, in the order of the index `ix_memories_created_at_id` (gateway/state/schema.py)."""
    return select(t.memories).order_by(t.memories.c.created_at, t.memories.c.id)


async def load_tree(conn: AsyncConnection, progress: LoadProgress | None = None) -> Tree:
    """The memories and grants of the state store as a Tree; StateCorrupt when the links are no tree."""
    progress = progress if progress is not None else LoadProgress()
    memories = (await conn.execute(select(func.count()).select_from(t.memories))).scalar_one()
    grants = (await conn.execute(select(func.count()).select_from(t.grants))).scalar_one()
    progress.total = int(memories) + int(grants)
    tree = Tree()
    # In key order: siblings then arrive sorted, and the database does the sorting, off the event loop.
    rows = await conn.stream(memories_in_key_order())
    async with contextlib.aclosing(fetched_ahead(rows.partitions(CHUNK))) as parts:  # closed at once on a failure
        async for part in parts:
            tree.load_nodes(part)
            progress.done += len(part)
            await asyncio.sleep(0)
    for _sorted in tree.order_children():
        await asyncio.sleep(0)
    for found in tree.checking_chain():
        if found is not None:
            raise broken_tree_error(*found)
        await asyncio.sleep(0)
    g = t.grants.c  # only what a Grant holds: a column less to fetch and unpack a million times
    rows = await conn.stream(select(g.id, g.memory_id, g.principal, g.privileges, g.implicit))
    async with contextlib.aclosing(fetched_ahead(rows.partitions(CHUNK))) as parts:
        async for part in parts:
            tree.load_grants(part, privileges_of_text)
            progress.done += len(part)
            await asyncio.sleep(0)
    return tree
