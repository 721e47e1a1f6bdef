"""Writing a bulk tree import (gateway/state/tree_import.py): all of it or none, and seen by other instances."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gateway.base.clock import now_ms
from gateway.state import coherence, tree_import
from gateway.state import schema as t
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode
from gateway.state.tree_import import BATCH, ImportRefused, TreePlan, write_plan
from policies.access import PRIVILEGES, Grant
from tests._postgres import PG_URL, fresh_schema

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@asynccontextmanager
async def two_stores(kind: str, tmp_path: Path) -> AsyncIterator[tuple[StateStore, StateStore]]:
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"
        a, b = await StateStore.open(url), await StateStore.open(url)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()
        return
    async with fresh_schema("treeimport") as (_engine, schema):
        a = await StateStore.open(PG_URL, search_path=schema)
        b = await StateStore.open(PG_URL, search_path=schema)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()


def chain_plan(anchor: MemoryNode, count: int) -> TreePlan:
    """`count` memories, each below the one before, the first below `anchor`, and the creator's grant."""
    stamp = now_ms()
    plan = TreePlan(stamp=stamp, anchors={anchor.id: count})
    parent = anchor.id
    for i in range(count):
        node = MemoryNode(f"m{i}", f"M{i}", "", parent if i == 0 else f"m{i - 1}", False, "local", "mbr_x",
                          stamp, stamp)
        plan.nodes.append(node)
    plan.anchors = {anchor.id: 1}
    plan.grants.append(Grant("hgrt_top", "m0", "member:mbr_x", frozenset(PRIVILEGES), implicit=True))
    return plan


def flat_plan(anchor: MemoryNode, count: int) -> TreePlan:
    stamp = now_ms()
    plan = TreePlan(stamp=stamp, anchors={anchor.id: 1})
    plan.nodes = [MemoryNode(f"f{i}", f"F{i}", "", anchor.id, False, "local", "mbr_x", stamp, stamp)
                  for i in range(count)]
    return plan


async def memory_ids(store: StateStore) -> set[str]:
    async with store.engine.connect() as conn:
        return {row.id for row in await conn.execute(sa.select(t.memories.c.id))}


@pytest.mark.parametrize("kind", KINDS)
async def test_an_import_cancelled_while_it_writes_leaves_nothing(kind: str, tmp_path: Path) -> None:
    """The caller cancelled after the first batch went in: the transaction is rolled back, no row and no
    in-memory node of the import remains, and the tree lock is free for the next write."""
    async with two_stores(kind, tmp_path) as (a, _b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        before = await memory_ids(a)
        first_batch = asyncio.Event()

        def progress(done: int, total: int) -> None:
            if done >= BATCH:
                first_batch.set()

        task = asyncio.create_task(write_plan(a, flat_plan(anchor, 3 * BATCH), progress))
        await first_batch.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await memory_ids(a) == before
        assert set(a.tree.all_ids()) == before
        assert not a.tree_lock.locked()
        after = await a.create_memory(name="Next", description="", parent_id=anchor.id, restricted=False,
                                      provider="local", created_by="mbr_x")
        assert a.tree.parent_of(after.id) == anchor.id


@pytest.mark.parametrize("kind", KINDS)
async def test_an_import_below_a_memory_another_instance_deleted_writes_nothing(kind: str, tmp_path: Path) -> None:
    """B deletes the import's parent after A checked the lines against its own tree: A's write finds it
    gone in the rows and refuses, and nothing of the import is written."""
    async with two_stores(kind, tmp_path) as (a, b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        await b.catch_up()
        plan = chain_plan(anchor, 50)
        await b.delete_subtree(anchor.id)
        with pytest.raises(ImportRefused) as refused:
            await write_plan(a, plan, lambda done, total: None)
        assert refused.value.kind == "not_found" and refused.value.memory_id == anchor.id
        assert await memory_ids(a) == set()
        assert not any(a.tree.exists(n.id) for n in plan.nodes)


@pytest.mark.parametrize("kind", KINDS)
async def test_another_instance_applies_an_import_from_one_change_row_per_batch(kind: str, tmp_path: Path) -> None:
    """An import of 2.5 batches writes three change rows, not one per memory; B's next catch-up holds
    every memory and grant of it; A, which made them, has nothing left to apply."""
    async with two_stores(kind, tmp_path) as (a, b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        await b.catch_up()
        await a.catch_up()  # A has applied everything before the import
        async with a.engine.connect() as conn:
            mark = await coherence.latest(conn)
        assert a.changes.seen == mark
        plan = flat_plan(anchor, BATCH * 5 // 2)
        plan.grants.append(Grant("hgrt_one", "f7", "member:mbr_y", frozenset({"read"})))
        await write_plan(a, plan, lambda done, total: None)
        async with a.engine.connect() as conn:
            rows = (await conn.execute(sa.select(t.state_changes).where(t.state_changes.c.seq > mark))).all()
            newest = await coherence.latest(conn)
        assert [row.kind for row in rows] == ["batch"] * 3
        assert a.changes.seen == newest
        await b.catch_up()
        assert len(b.tree) == 1 + len(plan.nodes)
        assert b.tree.parent_of(plan.nodes[-1].id) == anchor.id
        assert [g.principal for g in b.tree.grants_on("f7")] == ["member:mbr_y"]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_import_whose_parent_another_instance_moved_too_deep_writes_nothing(kind: str, tmp_path: Path) -> None:
    """A checked 10 levels below X against its own tree; meanwhile B moved X 251 levels down. A's write
    reads X's chain from the rows, finds the import would pass the depth limit, and writes nothing."""
    async with two_stores(kind, tmp_path) as (a, b):
        root = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                     provider="local", created_by="mbr_x")
        await write_plan(a, chain_plan(root, 250), lambda done, total: None)  # m0 .. m249 below Root
        x = await a.create_memory(name="X", description="", parent_id=None, restricted=False, provider="local",
                                  created_by="mbr_x")
        stamp = now_ms()
        plan = TreePlan(stamp=stamp, anchors={x.id: 10})
        plan.nodes = [MemoryNode(f"x{i}", "deep", "", x.id if i == 0 else f"x{i - 1}", False, "local", "mbr_x",
                                 stamp, stamp) for i in range(10)]
        await b.catch_up()
        await b.update_memory(x.id, parent_id="m249")
        before = await memory_ids(a)
        with pytest.raises(ImportRefused) as refused:
            await write_plan(a, plan, lambda done, total: None)
        assert refused.value.kind == "too_deep" and refused.value.memory_id == x.id
        assert await memory_ids(a) == before
        assert not a.tree.exists("x0")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_read_during_the_apply_waits_for_no_more_than_a_chunk_and_sees_whole_memories(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the tree takes an import of 3,000 memories 10 at a time, a request's catch-up returns at once
    (the import not yet wholly in the tree) and every imported memory it finds there has its grant and
    its parent; another instance's later change is applied after the import, not into it."""
    monkeypatch.setattr(tree_import, "_YIELD_EVERY", 10)
    async with two_stores(kind, tmp_path) as (a, b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        await b.catch_up()
        await a.catch_up()
        plan = flat_plan(anchor, 3000)
        plan.grants += [Grant(f"hgrt_{n.id}", n.id, "member:mbr_y", frozenset({"read"})) for n in plan.nodes]
        task = asyncio.create_task(write_plan(a, plan, lambda done, total: None))
        while not a.tree.exists(plan.nodes[0].id):
            await asyncio.sleep(0)
        other = asyncio.create_task(b.create_memory(name="Other", description="", parent_id=None, restricted=False,
                                                    provider="local", created_by="mbr_z"))
        seen_mid_apply = 0
        while not task.done():
            await a.catch_up()
            present = [n for n in plan.nodes if a.tree.exists(n.id)]
            if 0 < len(present) < len(plan.nodes):
                seen_mid_apply += 1
                if other.done():  # B's change is committed: it waits for the import to be in
                    assert not a.tree.exists(other.result().id)
            for node in present:
                assert node.parent_id is not None and a.tree.exists(node.parent_id)
                assert {g.principal for g in a.tree.grants_on(node.id)} >= {"member:mbr_y"}
            await asyncio.sleep(0)
        await task
        assert seen_mid_apply >= 2
        made = await other
        await a.catch_up()
        assert a.tree.exists(made.id) and all(a.tree.exists(n.id) for n in plan.nodes)


async def test_on_sqlite_the_import_writes_with_a_large_page_cache_and_gives_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch goes in with the connection's page cache at BULK_CACHE_KIB; once the import is in, every
    connection the pool holds has SQLite's own cache again."""
    seen: list[int] = []
    insert = tree_import.insert_rows

    async def noting(conn: Any, table: Any, rows: list[tuple[Any, ...]]) -> None:
        seen.append(int((await conn.exec_driver_sql("PRAGMA cache_size")).scalar()))
        await insert(conn, table, rows)

    monkeypatch.setattr(tree_import, "insert_rows", noting)
    async with two_stores("sqlite", tmp_path) as (a, _b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        async with a.engine.connect() as conn:
            own = int((await conn.exec_driver_sql("PRAGMA cache_size")).scalar_one())
        await write_plan(a, flat_plan(anchor, BATCH + 10), lambda done, total: None)
        assert seen == [-tree_import.BULK_CACHE_KIB] * 2
        idle = a.engine.sync_engine.pool.checkedin()  # type: ignore[attr-defined]
        held = [await a.engine.connect() for _ in range(max(1, idle))]
        try:
            sizes = [int((await c.exec_driver_sql("PRAGMA cache_size")).scalar_one()) for c in held]
        finally:
            for c in held:
                await c.close()
        assert sizes == [own] * len(held) and own != -tree_import.BULK_CACHE_KIB


async def test_a_read_while_the_import_commits_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import's rows are committed and visible, but its commit has not returned yet (SQLite's
    checkpoint after a large commit runs inside it): a request's catch-up then returns without waiting for
    the import, and the tree does not hold the import yet; once the commit returns, it does."""
    from sqlalchemy.ext.asyncio import AsyncConnection

    gate, reached = asyncio.Event(), asyncio.Event()
    armed = False
    commit = AsyncConnection.commit

    async def slow_commit(self: AsyncConnection) -> None:
        await commit(self)
        if armed:
            reached.set()
            await gate.wait()

    monkeypatch.setattr(AsyncConnection, "commit", slow_commit)
    async with two_stores("sqlite", tmp_path) as (a, _b):
        anchor = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                       provider="local", created_by="mbr_x")
        await a.catch_up()
        plan = flat_plan(anchor, 50)
        armed = True
        task = asyncio.create_task(write_plan(a, plan, lambda done, total: None))
        await reached.wait()
        armed = False
        reader = asyncio.create_task(a.catch_up())
        done, _ = await asyncio.wait({reader}, timeout=30)  # a guard against a hang, not a measure
        assert reader in done and reader.result() is None
        assert not a.tree.exists(plan.nodes[0].id)
        gate.set()
        await task
        assert all(a.tree.exists(n.id) for n in plan.nodes)
