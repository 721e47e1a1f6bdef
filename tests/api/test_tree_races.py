"""Tree changes that race each other: each is checked and applied as one step, so the tree stays a tree.

These tests start the racing requests together (asyncio.gather through the in-process app) or hold one
of them at a known point (a provider drop that waits on an event) while the other runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select

from gateway.state import schema as t
from tests._tree_checks import cycle_in, hang_breaker
from tests.api._gateway import Gateway


async def parents_in_database(gateway: Gateway) -> dict[str, str | None]:
    async with gateway.services.store.engine.connect() as conn:
        return {row.id: row.parent_id for row in await conn.execute(select(t.memories.c.id, t.memories.c.parent_id))}


async def test_a_concurrent_swap_of_parents_never_makes_a_cycle(gateway: Gateway) -> None:
    """X under Y and Y under X at once, by a member holding only create on their parent: one move wins,
    the other is refused as a cycle, and the gateway keeps answering."""
    root = await gateway.root()
    member_id, client = await gateway.member("mover")
    await gateway.grant(root["id"], f"member:{member_id}", "create")
    x = await gateway.child(client, root["id"], "X")
    y = await gateway.child(client, root["id"], "Y")
    with hang_breaker():
        first, second = await asyncio.gather(
            client.put(f"/v1/memories/{x['id']}", json={"parent_id": y["id"]}),
            client.put(f"/v1/memories/{y['id']}", json={"parent_id": x["id"]}),
        )
        assert sorted([first.status_code, second.status_code]) == [200, 422], (first.text, second.text)
        refused = first if first.status_code == 422 else second
        assert refused.json()["error"]["code"] == "memory_invalid"
        assert cycle_in(await parents_in_database(gateway)) is None
        assert (await gateway.admin.get("/v1/uhp")).status_code == 200
        listing = await client.get("/v1/memories", params={"ancestor": root["id"]})
        assert {m["id"] for m in listing.json()["data"]} == {x["id"], y["id"]}


@pytest.mark.parametrize("size", [3, 5])
async def test_a_ring_of_concurrent_moves_never_makes_a_cycle(gateway: Gateway, size: int) -> None:
    """Each of several siblings moved under the next at once: at most all but one move, never a ring."""
    root = await gateway.root()
    member_id, client = await gateway.member("mover")
    await gateway.grant(root["id"], f"member:{member_id}", "create")
    ring = [await gateway.child(client, root["id"], f"N{i}") for i in range(size)]
    with hang_breaker():
        answers = await asyncio.gather(*(
            client.put(f"/v1/memories/{ring[i]['id']}", json={"parent_id": ring[(i + 1) % size]["id"]})
            for i in range(size)))
        assert all(a.status_code in (200, 422) for a in answers), [a.text for a in answers]
        assert sum(a.status_code == 422 for a in answers) >= 1
        assert cycle_in(await parents_in_database(gateway)) is None
        assert cycle_in({m: gateway.services.store.tree.parent_of(m)
                         for m in gateway.services.store.tree.all_ids()}) is None


class HeldDrop:
    """The embedded provider's drop_memory, held at its start until `release()`: a delete in progress."""

    def __init__(self, gateway: Gateway) -> None:
        self.provider = gateway.services.providers.handles["local"].provider
        self.inner = self.provider.drop_memory
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def drop_memory(self, memory_id: str) -> None:
        self.entered.set()
        await self.gate.wait()
        await self.inner(memory_id)

    def __enter__(self) -> HeldDrop:
        self.provider.drop_memory = self.drop_memory  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self.provider.drop_memory = self.inner  # type: ignore[method-assign]
        self.gate.set()


async def deleting(gateway: Gateway, held: HeldDrop, memory_id: str) -> asyncio.Task[Any]:
    """A DELETE of the memory, started and held at its first provider drop."""
    task = asyncio.ensure_future(gateway.admin.delete(f"/v1/memories/{memory_id}"))
    await asyncio.wait_for(held.entered.wait(), 30)
    return task


async def test_no_child_is_created_under_a_memory_being_deleted(gateway: Gateway) -> None:
    """While a delete drops its subtree's records, a new child there is 409 memory_busy: it could not be
    removed with the rest, and its records would outlive the delete."""
    root = await gateway.root()
    doomed = await gateway.child(gateway.admin, root["id"], "Doomed")
    below = await gateway.child(gateway.admin, doomed["id"], "Below")
    with HeldDrop(gateway) as held:
        task = await deleting(gateway, held, doomed["id"])
        made = await gateway.admin.post("/v1/memories", json={"name": "Late", "parent_id": below["id"]})
        if made.status_code == 201:
            await gateway.admin.post(f"/v1/memories/{made.json()['id']}/records", json={"content": "orphan"})
        held.gate.set()
        assert (await task).status_code == 200
    assert made.status_code == 409, made.text
    assert made.json()["error"]["code"] == "memory_busy"
    assert not set(await parents_in_database(gateway)) & {doomed["id"], below["id"]}


async def test_no_grant_is_added_on_a_memory_being_deleted(gateway: Gateway) -> None:
    """A grant on a memory whose delete is under way is 409 memory_busy, and no grant row is left."""
    root = await gateway.root()
    doomed = await gateway.child(gateway.admin, root["id"], "Doomed")
    member_id, _ = await gateway.member("grantee")
    with HeldDrop(gateway) as held:
        task = await deleting(gateway, held, doomed["id"])
        granted = await gateway.admin.post(f"/v1/memories/{doomed['id']}/grants",
                                           json={"principal": f"member:{member_id}", "privileges": ["read"]})
        held.gate.set()
        assert (await task).status_code == 200
    assert granted.status_code == 409, granted.text
    assert not gateway.services.store.tree.grants_to(f"member:{member_id}")


async def test_no_memory_leaves_or_joins_a_subtree_being_deleted(gateway: Gateway) -> None:
    """A move out of a subtree being deleted (its records may be dropped already) or into it is 409."""
    root = await gateway.root()
    doomed = await gateway.child(gateway.admin, root["id"], "Doomed")
    inside = await gateway.child(gateway.admin, doomed["id"], "Inside")
    outside = await gateway.child(gateway.admin, root["id"], "Outside")
    await gateway.admin.post(f"/v1/memories/{inside['id']}/records", json={"content": "kept?"})
    with HeldDrop(gateway) as held:
        task = await deleting(gateway, held, doomed["id"])
        leaving = await gateway.admin.put(f"/v1/memories/{inside['id']}", json={"parent_id": outside["id"]})
        joining = await gateway.admin.put(f"/v1/memories/{outside['id']}", json={"parent_id": inside["id"]})
        held.gate.set()
        assert (await task).status_code == 200
    assert (leaving.status_code, joining.status_code) == (409, 409), (leaving.text, joining.text)
    assert (await gateway.admin.get(f"/v1/memories/{outside['id']}")).json()["parent_id"] == root["id"]
    assert (await gateway.admin.get(f"/v1/memories/{inside['id']}")).status_code == 404


async def test_no_consolidation_starts_on_a_memory_being_deleted(gateway: Gateway) -> None:
    """A consolidation run would write into a memory whose records are being dropped: 409 memory_busy."""
    root = await gateway.root()
    doomed = await gateway.child(gateway.admin, root["id"], "Doomed")
    with HeldDrop(gateway) as held:
        task = await deleting(gateway, held, doomed["id"])
        started = await gateway.admin.post(f"/v1/memories/{doomed['id']}/consolidations", json={})
        held.gate.set()
        assert (await task).status_code == 200
    assert started.status_code == 409, started.text


async def test_a_grant_racing_a_move_is_checked_after_the_move(gateway: Gateway, monkeypatch: Any) -> None:
    """A member holding delete on X through X's old parent cannot grant on X once X has moved away, even
    when its grant request arrives while the move is being written."""
    root = await gateway.root()
    old_parent = await gateway.child(gateway.admin, root["id"], "Old")
    new_parent = await gateway.child(gateway.admin, root["id"], "New")
    x = await gateway.child(gateway.admin, old_parent["id"], "X")
    owner_id, owner = await gateway.member("owner")
    await gateway.grant(old_parent["id"], f"member:{owner_id}", "read", "delete")
    friend_id, _ = await gateway.member("friend")
    store = gateway.services.store
    inner = store.update_memory
    writing, gate = asyncio.Event(), asyncio.Event()

    async def held_update(memory_id: str, **changes: Any) -> Any:
        writing.set()
        await gate.wait()
        return await inner(memory_id, **changes)

    monkeypatch.setattr(store, "update_memory", held_update)
    move = asyncio.ensure_future(gateway.admin.put(f"/v1/memories/{x['id']}", json={"parent_id": new_parent["id"]}))
    await asyncio.wait_for(writing.wait(), 30)
    grant = asyncio.ensure_future(owner.post(f"/v1/memories/{x['id']}/grants",
                                             json={"principal": f"member:{friend_id}", "privileges": ["read"]}))
    await asyncio.wait({grant}, timeout=1)  # time for the grant to be decided if nothing holds it back
    gate.set()
    moved, granted = await asyncio.gather(move, grant)
    assert moved.status_code == 200, moved.text
    assert granted.status_code == 404, granted.text
    assert not store.tree.grants_to(f"member:{friend_id}")
