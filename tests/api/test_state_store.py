"""The state store on SQLite and on PostgreSQL: what is written is what a fresh process loads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from gateway.state.store import StateStore
from tests._postgres import PG_URL, fresh_schema
from tests.api._gateway import make_config, running_gateway


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str | None]]:
    """(url, schema): a file for SQLite; a fresh schema, dropped afterwards, for PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite3'}", None
        return
    async with fresh_schema("memfed_test") as (_engine, schema):
        yield PG_URL, schema


async def test_everything_written_is_loaded_by_a_new_store(database: tuple[str, str | None]) -> None:
    """Members, keys, groups, memories, grants and restricted flags survive a reopen."""
    url, schema = database
    store = await StateStore.open(url, search_path=schema)
    admin = await store.create_member("admin", "human", is_admin=True)
    agent = await store.create_member("bot", "agent", external_subject="https://idp#bot")
    _, secret = await store.create_key(agent.id)
    group = await store.create_group("team")
    await store.add_to_group(group.id, agent.id)
    root = await store.create_memory(name="Root", description="d", parent_id=None, restricted=False,
                                     provider="local", created_by=admin.id)
    child = await store.create_memory(name="Child", description="", parent_id=root.id, restricted=True,
                                      provider="local", created_by=admin.id)
    grant = await store.add_grant(child.id, f"group:{group.id}", frozenset({"read", "write"}))
    await store.update_memory(child.id, name="Renamed")
    await store.close()

    again = await StateStore.open(url, search_path=schema)
    try:
        assert again.member_for_key(secret) == agent
        assert again.member_for_subject("https://idp#bot") == agent
        assert again.groups_of(agent.id) == (group.id,)
        loaded = again.tree.get(child.id)
        assert loaded is not None and loaded.name == "Renamed" and loaded.restricted
        assert list(again.tree.children_of(root.id)) == [child.id]
        assert again.tree.grant(grant.id) == grant
        implicit = [g for g in again.tree.grants_on(root.id) if g.implicit]
        assert implicit and implicit[0].principal == f"member:{admin.id}"
    finally:
        await again.close()


async def test_deleting_a_subtree_removes_its_rows(database: tuple[str, str | None]) -> None:
    """delete_subtree removes the memories and their grants from the database, not only from memory."""
    url, schema = database
    store = await StateStore.open(url, search_path=schema)
    admin = await store.create_member("admin", "human", is_admin=True)
    root = await store.create_memory(name="R", description="", parent_id=None, restricted=False,
                                     provider="local", created_by=admin.id)
    child = await store.create_memory(name="C", description="", parent_id=root.id, restricted=False,
                                      provider="local", created_by=admin.id)
    await store.delete_subtree(root.id)
    await store.close()
    again = await StateStore.open(url, search_path=schema)
    try:
        assert not again.tree.exists(root.id) and not again.tree.exists(child.id)
        assert not again.tree.grants_to(f"member:{admin.id}")
    finally:
        await again.close()


@pytest.mark.postgres
async def test_the_api_runs_on_postgresql(tmp_path: Path) -> None:
    """With state.url = postgresql://…, the gateway serves the tree, grants and records as on SQLite."""
    async with fresh_schema("memfed_api") as (engine, schema):
        config = make_config(tmp_path, state={"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema})
        async with running_gateway(config) as gw:
            root = await gw.root()
            member_id, client = await gw.member("m")
            await gw.grant(root["id"], f"member:{member_id}", "read", "write")
            made = await client.post(f"/v1/memories/{root['id']}/records", json={"content": "on postgres"})
            assert made.status_code == 201
            found = (await client.post(f"/v1/memories/{root['id']}/recall", json={"text": "postgres"})).json()
            assert [r["record"]["id"] for r in found["results"]] == [made.json()["id"]]
        async with engine.connect() as conn:
            count = (await conn.execute(text(f'SELECT count(*) FROM "{schema}".memories'))).scalar_one()
        assert count == 1
