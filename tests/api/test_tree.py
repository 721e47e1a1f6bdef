"""The tree (§2): creation rights, listings, ancestors as far as the caller sees, moves and deletes."""

from __future__ import annotations

from tests.api._gateway import Gateway


async def test_a_root_needs_an_admin(gateway: Gateway) -> None:
    """A member who is not an admin cannot create a root memory."""
    _, client = await gateway.member("ann")
    answer = await client.post("/v1/memories", json={"name": "Mine"})
    assert answer.status_code == 403


async def test_a_child_needs_create_on_its_parent(gateway: Gateway) -> None:
    """create on the parent lets a member add a child; read alone does not."""
    root = await gateway.root()
    reader_id, reader = await gateway.member("reader")
    creator_id, creator = await gateway.member("creator")
    await gateway.grant(root["id"], f"member:{reader_id}", "read")
    await gateway.grant(root["id"], f"member:{creator_id}", "create")
    refused = await reader.post("/v1/memories", json={"name": "X", "parent_id": root["id"]})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "memory_forbidden"
    made = await creator.post("/v1/memories", json={"name": "Y", "parent_id": root["id"]})
    assert made.status_code == 201
    assert made.json()["privileges"] == ["read", "write", "create", "delete"]
    assert made.json()["provider"] == "local"


async def test_a_memory_the_caller_holds_nothing_on_reads_as_missing(gateway: Gateway) -> None:
    """GET of a memory without any privilege answers exactly like a memory that does not exist."""
    root = await gateway.root()
    _, stranger = await gateway.member("stranger")
    hidden = await stranger.get(f"/v1/memories/{root['id']}")
    missing = await stranger.get("/v1/memories/hmem_00000000000000000000000000000000")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()


async def test_listing_without_parent_gives_entry_points(gateway: Gateway) -> None:
    """A member granted one branch enters the tree at that branch, not at the root."""
    root = await gateway.root()
    sales = await gateway.child(gateway.admin, root["id"], "Sales")
    acme = await gateway.child(gateway.admin, sales["id"], "Acme")
    member_id, client = await gateway.member("sam")
    await gateway.grant(sales["id"], f"member:{member_id}", "read")
    listing = (await client.get("/v1/memories")).json()
    assert [m["id"] for m in listing["data"]] == [sales["id"]]
    assert listing["data"][0]["ancestors"] == []
    assert listing["data"][0]["parent_id"] is None  # the root exists, but this member cannot see it
    children = (await client.get("/v1/memories", params={"parent": sales["id"]})).json()
    assert [m["id"] for m in children["data"]] == [acme["id"]]
    assert children["data"][0]["ancestors"] == [sales["id"]]


async def test_ancestor_listing_gives_every_readable_descendant(gateway: Gateway) -> None:
    """?ancestor= lists the whole readable subtree, skipping a restricted branch the caller is not in."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    a1 = await gateway.child(gateway.admin, a["id"], "A1")
    secret = await gateway.child(gateway.admin, root["id"], "Secret", restricted=True)
    await gateway.child(gateway.admin, secret["id"], "Inside")
    member_id, client = await gateway.member("reader")
    await gateway.grant(root["id"], f"member:{member_id}", "read")
    listing = (await client.get("/v1/memories", params={"ancestor": root["id"]})).json()
    assert {m["id"] for m in listing["data"]} == {a["id"], a1["id"]}


async def test_listing_is_paginated(gateway: Gateway) -> None:
    """limit and next page through a level without repeating or losing a memory."""
    root = await gateway.root()
    made = {(await gateway.child(gateway.admin, root["id"], f"c{i}"))["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    while True:
        params = {"parent": root["id"], "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await gateway.admin.get("/v1/memories", params=params)).json()
        seen.extend(m["id"] for m in page["data"])
        cursor = page["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made)


async def test_counts_and_privileges_on_every_memory(gateway: Gateway) -> None:
    """Each memory carries the caller's privileges and counts of records and of visible children."""
    root = await gateway.root()
    child = await gateway.child(gateway.admin, root["id"], "Child")
    await gateway.admin.post(f"/v1/memories/{root['id']}/records", json={"content": "one"})
    await gateway.admin.post(f"/v1/memories/{root['id']}/records", json={"content": "two"})
    got = (await gateway.admin.get(f"/v1/memories/{root['id']}")).json()
    assert got["records"]["count"] == 2
    assert got["children"]["count"] == 1
    assert got["privileges"] == ["read", "write", "create", "delete"]
    member_id, client = await gateway.member("limited")
    await gateway.grant(child["id"], f"member:{member_id}", "read")
    seen = (await client.get(f"/v1/memories/{child['id']}")).json()
    assert seen["privileges"] == ["read"]


async def test_rename_describe_restrict_and_move(gateway: Gateway) -> None:
    """PUT renames, describes, restricts and moves; each change is kept."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    b = await gateway.child(gateway.admin, root["id"], "B")
    changed = await gateway.admin.put(f"/v1/memories/{a['id']}", json={
        "name": "A2", "description": "about a", "restricted": True, "parent_id": b["id"]})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["name"], body["description"], body["restricted"], body["parent_id"]) == (
        "A2", "about a", True, b["id"])
    assert body["ancestors"] == [root["id"], b["id"]]


async def test_a_move_that_makes_a_cycle_is_refused(gateway: Gateway) -> None:
    """Moving a memory under itself or under its own descendant is 422 memory_invalid; nothing changes."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    a1 = await gateway.child(gateway.admin, a["id"], "A1")
    for target in (a["id"], a1["id"]):
        answer = await gateway.admin.put(f"/v1/memories/{a['id']}", json={"parent_id": target})
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "memory_invalid"
    assert (await gateway.admin.get(f"/v1/memories/{a['id']}")).json()["parent_id"] == root["id"]


async def test_moving_needs_delete_here_and_create_at_the_destination(gateway: Gateway) -> None:
    """A writer cannot move a memory; a move into a memory the mover cannot see is 404."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    elsewhere = await gateway.root("Elsewhere")
    member_id, client = await gateway.member("mover")
    await gateway.grant(a["id"], f"member:{member_id}", "read", "write", "delete")
    unseen = await client.put(f"/v1/memories/{a['id']}", json={"parent_id": elsewhere["id"]})
    assert unseen.status_code == 404
    writer_id, writer = await gateway.member("writer")
    await gateway.grant(a["id"], f"member:{writer_id}", "write")
    refused = await writer.put(f"/v1/memories/{a['id']}", json={"restricted": True})
    assert refused.status_code == 403


async def test_delete_removes_the_subtree_and_its_records(gateway: Gateway) -> None:
    """DELETE needs delete, and removes descendants and their records."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    a1 = await gateway.child(gateway.admin, a["id"], "A1")
    await gateway.admin.post(f"/v1/memories/{a1['id']}/records", json={"content": "kept below"})
    member_id, client = await gateway.member("writer")
    await gateway.grant(a["id"], f"member:{member_id}", "read", "write")
    assert (await client.delete(f"/v1/memories/{a['id']}")).status_code == 403
    assert (await gateway.admin.delete(f"/v1/memories/{a['id']}")).status_code == 200
    for memory in (a, a1):
        assert (await gateway.admin.get(f"/v1/memories/{memory['id']}")).status_code == 404
    local = gateway.services.providers["local"].provider
    assert (await local.count([a1["id"]])).get(a1["id"], 0) == 0


async def test_provider_is_inherited_and_unknown_is_422(gateway: Gateway) -> None:
    """A child takes its parent's provider; naming an unknown provider is 422."""
    root = await gateway.root()
    bad = await gateway.admin.post("/v1/memories", json={"name": "X", "parent_id": root["id"],
                                                         "provider": "nowhere"})
    assert bad.status_code == 422
    assert bad.json()["error"]["param"] == "provider"
    child = await gateway.child(gateway.admin, root["id"], "Child")
    assert child["provider"] == root["provider"] == "local"
