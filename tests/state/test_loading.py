"""The tree is loaded in chunks that let the event loop run: while it loads, other tasks are served and
`/readyz` answers 503 `loading` with how far it is (a share, no counts), other routes 503 `memfed_loading`
with Retry-After; the tree loaded so is the one built change by change."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine

from gateway.api.health import Readiness
from gateway.base.config import from_mapping
from gateway.server.app import begin_serving, create_app, open_services
from gateway.state import loading
from gateway.state import schema as t
from gateway.state.engine import open_engine
from gateway.state.tree import Tree

COUNT = 1500


def _seed(path: Path) -> list[tuple[object, ...]]:
    """COUNT memories (a root, then each under an earlier one, one in seven restricted) with their
    creators' grants, written straight into memfed's tables."""
    engine = create_engine(f"sqlite:///{path}")
    t.metadata.create_all(engine)
    engine.dispose()
    rows: list[tuple[object, ...]] = []
    for i in range(COUNT):
        parent = None if i == 0 else f"m{(i * 7919) % i:05d}"
        rows.append((f"m{i:05d}", f"n{i}", "", parent, i % 7 == 3, "local", "admin", 5000 - i, 5000 - i))
    db = sqlite3.connect(path)
    db.executemany("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.executemany("INSERT INTO grants VALUES (?,?,?,?,?,?)",
                   [(f"g{r[0]}", r[0], "member:admin", "read,write,create,delete", True, 0) for r in rows])
    db.commit()
    db.close()
    return rows


async def test_a_load_in_chunks_lets_other_tasks_run_and_builds_the_same_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With chunks of 50 rows, a task that only counts loop turns runs many times during the load, the
    progress rises to every row read, and the tree equals one made by `put` and `add_grant`."""
    monkeypatch.setattr(loading, "CHUNK", 50)
    rows = _seed(tmp_path / "state.sqlite3")
    turns = 0
    stop = asyncio.Event()

    async def count_turns() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}", None)
    progress = loading.LoadProgress()
    counter = asyncio.create_task(count_turns())
    try:
        async with engine.connect() as conn:
            tree = await loading.load_tree(conn, progress)
    finally:
        stop.set()
        await counter
        await engine.dispose()
    assert turns >= 2 * COUNT // 50  # at least one turn per chunk of memories and of grants
    assert progress.done == progress.total == 2 * COUNT

    from gateway.state.rows import node_of_row  # the rows as the store's own reader makes nodes

    columns = ("id", "name", "description", "parent_id", "restricted", "provider", "created_by", "created_at",
               "updated_at")
    expected = Tree()
    for row in rows:
        expected.put(node_of_row(type("Row", (), dict(zip(columns, row, strict=True)))))
    for memory_id in [None, *(str(r[0]) for r in rows)]:
        got = tree.roots() if memory_id is None else tree.children_of(memory_id)
        want = expected.roots() if memory_id is None else expected.children_of(memory_id)
        assert list(got) == list(want), memory_id
    assert all(tree.get(str(r[0])) == expected.get(str(r[0])) for r in rows)
    assert {g.id for r in rows for g in tree.grants_on(str(r[0]))} == {f"g{r[0]}" for r in rows}
    assert set(tree.restricted_children_of("m00000")) == {c for c in expected.children_of("m00000")
                                                          if expected.is_restricted(c)}


async def test_readiness_says_loading_with_progress_while_the_tree_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While open_services loads a tree (slowed to chunks of 20 rows), /readyz is 503 `loading` with an
    integer progress below 100, a route is 503 memfed_loading with Retry-After, /healthz is 200; once
    serving, /readyz is 200 and says no progress."""
    monkeypatch.setattr(loading, "CHUNK", 20)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    _seed(data / "state.sqlite3")
    config = from_mapping({}).with_overrides(data_dir=data)
    readiness = Readiness()
    app = create_app(config, readiness=readiness)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed") as client:
        opening = asyncio.create_task(open_services(config, progress=readiness.progress))
        seen: list[dict[str, Any]] = []
        refused: list[httpx.Response] = []
        while not opening.done():
            probe = await client.get("/readyz")
            assert probe.status_code == 503
            seen.append(probe.json())
            refused.append(await client.get("/v1/uhp"))
            assert (await client.get("/healthz")).status_code == 200
            await asyncio.sleep(0.005)  # the in-process probes need not suspend: let the load go on
        services = await opening
        try:
            assert seen, "the load ended before a probe was answered"
            assert all(body["status"] == "loading" for body in seen)
            shares = [body["progress"] for body in seen]
            assert all(isinstance(s, int) and 0 <= s < 100 for s in shares)
            assert max(shares) > 0  # probes were answered part way through, not only before the load
            assert all(r.status_code == 503 and r.json()["error"]["code"] == "memfed_loading"
                       and r.headers["retry-after"] == "1" for r in refused)
            await begin_serving(app, services)
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and "progress" not in ready.json()
        finally:
            await services.close()
