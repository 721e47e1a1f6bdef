"""The state store keeps its memories a tree: checked from the rows as each change is written (so another
gateway on the same database is seen too), refused at start when the rows already hold a cycle, and left
consistent when a change is cancelled half way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from gateway.state import schema as t
from gateway.state import tree_writes
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode
from gateway.state.tree_check import StateCorrupt
from gateway.state.tree_writes import TreeRefused
from policies.access import MAX_DEPTH
from tests._postgres import PG_URL, fresh_schema
from tests._tree_checks import cycle_in

Database = tuple[str, str | None]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """(url, schema): a file for SQLite; a fresh schema, dropped afterwards, for PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}", None
        return
    async with fresh_schema("memfed_tree") as (_engine, schema):
        yield PG_URL, schema


async def memory(store: StateStore, parent: MemoryNode | None, name: str = "m") -> MemoryNode:
    return await store.create_memory(name=name, description="", parent_id=parent.id if parent else None,
                                     restricted=False, provider="local", created_by="mbr_test")


async def parents_in(store: StateStore) -> dict[str, str | None]:
    async with store.engine.connect() as conn:
        return {row.id: row.parent_id for row in await conn.execute(select(t.memories.c.id, t.memories.c.parent_id))}


async def test_a_move_is_checked_against_rows_another_gateway_wrote(database: Database) -> None:
    """Another instance moved Y under X; this one's in-memory tree does not know. Moving X under Y is
    refused as a cycle, because the check reads the destination's parents from the rows."""
    url, schema = database
    store = await StateStore.open(url, search_path=schema)
    try:
        root = await memory(store, None)
        x, y = await memory(store, root, "X"), await memory(store, root, "Y")
        async with store.engine.begin() as conn:  # what the other gateway wrote
            await conn.execute(text("UPDATE memories SET parent_id = :x WHERE id = :y"), {"x": x.id, "y": y.id})
        with pytest.raises(TreeRefused) as refused:
            await store.update_memory(x.id, parent_id=y.id)
        assert refused.value.kind == "cycle"
        assert cycle_in(await parents_in(store)) is None
        assert store.tree.parent_of(x.id) == root.id  # nothing applied in memory either
    finally:
        await store.close()


async def test_two_gateways_on_one_database_never_make_a_cycle(database: Database) -> None:
    """Two store instances on one database move X under Y and Y under X at once: one move is refused."""
    url, schema = database
    first = await StateStore.open(url, search_path=schema)
    try:
        root = await memory(first, None)
        pairs = [(await memory(first, root, f"X{i}"), await memory(first, root, f"Y{i}")) for i in range(5)]
        second = await StateStore.open(url, search_path=schema)
        try:
            for x, y in pairs:
                outcomes = await asyncio.gather(first.update_memory(x.id, parent_id=y.id),
                                                second.update_memory(y.id, parent_id=x.id), return_exceptions=True)
                refused = [o for o in outcomes if isinstance(o, BaseException)]
                assert len(refused) == 1, outcomes
                assert isinstance(refused[0], TreeRefused) and refused[0].kind == "cycle", refused
            assert cycle_in(await parents_in(first)) is None
        finally:
            await second.close()
    finally:
        await first.close()


async def test_a_store_holding_a_cycle_is_refused_at_start(database: Database) -> None:
    """Rows whose parents loop (X under Y under X) stop the open with one line naming both memories."""
    url, schema = database
    store = await StateStore.open(url, search_path=schema)
    root = await memory(store, None)
    x, y = await memory(store, root, "X"), await memory(store, root, "Y")
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE memories SET parent_id = :y WHERE id = :x"), {"x": x.id, "y": y.id})
        await conn.execute(text("UPDATE memories SET parent_id = :x WHERE id = :y"), {"x": x.id, "y": y.id})
    await store.close()
    for opening in (StateStore.open(url, search_path=schema), StateStore.check_tree(url, search_path=schema)):
        with pytest.raises(StateCorrupt) as corrupt:
            await opening
        message = str(corrupt.value)
        assert x.id in message and y.id in message and "cycle" in message and "\n" not in message


async def test_serve_refuses_a_store_holding_a_cycle_with_one_line(tmp_path: Path, monkeypatch: Any,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`memfed serve` on a state store whose memories loop exits 2 with one line naming them, before
    the server serves a request (it would hang on the first listing): the port, bound while the tree
    loads, only ever answered 503 loading."""
    import uvicorn

    from gateway.cli import main

    store = await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}")
    root = await memory(store, None)
    x, y = await memory(store, root, "X"), await memory(store, root, "Y")
    async with store.engine.begin() as conn:
        await conn.execute(text("UPDATE memories SET parent_id = :y WHERE id = :x"), {"x": x.id, "y": y.id})
        await conn.execute(text("UPDATE memories SET parent_id = :x WHERE id = :y"), {"x": x.id, "y": y.id})
    await store.close()

    def refuse_to_serve(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the server was started on a state store holding a cycle")

    monkeypatch.setattr(uvicorn, "run", refuse_to_serve)
    code = await asyncio.to_thread(main, ["serve", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and x.id in err and y.id in err, err


async def test_a_fresh_data_dir_passes_the_start_check(tmp_path: Path) -> None:
    """The start check reads a store that does not exist yet as a tree, and creates nothing."""
    await StateStore.check_tree(f"sqlite+aiosqlite:///{tmp_path / 'absent' / 'state.sqlite3'}")
    assert not (tmp_path / "absent").exists()


async def test_no_memory_sits_deeper_than_max_depth(database: Database) -> None:
    """A chain reaches MAX_DEPTH levels below its root and no further, by a create or by a move."""
    url, schema = database
    store = await StateStore.open(url, search_path=schema)
    try:
        chain = [await memory(store, None)]
        for _ in range(MAX_DEPTH):
            chain.append(await memory(store, chain[-1]))
        assert store.tree.depth_of(chain[-1].id) == MAX_DEPTH
        with pytest.raises(TreeRefused) as refused:
            await memory(store, chain[-1])
        assert refused.value.kind == "too_deep"
        other = await memory(store, None)
        leaf = await memory(store, other)
        with pytest.raises(TreeRefused) as refused:  # `other` would sit at MAX_DEPTH, its child below it
            await store.update_memory(other.id, parent_id=chain[-2].id)
        assert refused.value.kind == "too_deep"
        await store.update_memory(leaf.id, parent_id=chain[-2].id)  # a leaf fits at MAX_DEPTH
        assert store.tree.depth_of(leaf.id) == MAX_DEPTH
    finally:
        await store.close()


async def test_a_cancelled_move_leaves_database_and_tree_agreeing(tmp_path: Path, monkeypatch: Any) -> None:
    """A move cancelled inside its transaction runs to its end (database and tree both moved), and the
    tree lock is free afterwards; one cancelled while waiting for the lock changes nothing."""
    store = await StateStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}")
    try:
        root = await memory(store, None)
        x, y = await memory(store, root, "X"), await memory(store, root, "Y")
        inside, gate = asyncio.Event(), asyncio.Event()
        chain_rows = tree_writes.chain_rows

        async def held_chain(conn: Any, memory_id: str) -> list[str]:
            inside.set()
            await gate.wait()
            return await chain_rows(conn, memory_id)

        monkeypatch.setattr(tree_writes, "chain_rows", held_chain)
        move = asyncio.ensure_future(store.update_memory(x.id, parent_id=y.id))
        await asyncio.wait_for(inside.wait(), 30)
        move.cancel()
        await asyncio.sleep(0)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await move
        assert (await parents_in(store))[x.id] == store.tree.parent_of(x.id) == y.id
        monkeypatch.setattr(tree_writes, "chain_rows", chain_rows)

        async with store.tree_lock.held():
            waiting = asyncio.ensure_future(store.update_memory(y.id, name="never"))
            await asyncio.sleep(0.01)
            waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert store.tree.get(y.id).name == "Y"  # type: ignore[union-attr]
        renamed = await asyncio.wait_for(store.update_memory(y.id, name="after"), 30)
        assert renamed.name == "after" and not store.tree_lock.locked()
    finally:
        await store.close()
