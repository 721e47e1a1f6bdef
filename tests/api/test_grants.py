"""Grants (§3): principals, inheritance, the restricted cutoff, groups, and who may change grants."""

from __future__ import annotations

from tests.api._gateway import Gateway


async def test_grants_listing_says_on_which_node_each_grant_sits(gateway: Gateway) -> None:
    """The listing of a child shows its own grants and the inherited ones with their memory_id."""
    root = await gateway.root()
    child = await gateway.child(gateway.admin, root["id"], "Child")
    member_id, _ = await gateway.member("m")
    grant = await gateway.grant(root["id"], f"member:{member_id}", "read")
    listing = (await gateway.admin.get(f"/v1/memories/{child['id']}/grants")).json()["data"]
    sitting = {(g["principal"], g["memory_id"]) for g in listing}
    assert (f"member:{member_id}", root["id"]) in sitting
    assert any(g["implicit"] and g["memory_id"] == child["id"] for g in listing)
    assert any(g["id"] == grant["id"] for g in listing)


async def test_principal_kinds(gateway: Gateway) -> None:
    """member:, group: and x.-prefixed kinds are accepted; provider:, bare or unknown kinds are 422."""
    root = await gateway.root()
    member_id, _ = await gateway.member("m")
    group = (await gateway.admin.post("/v1/groups", json={"name": "g"})).json()
    for ok in (f"member:{member_id}", f"group:{group['id']}", "x.team:blue"):
        answer = await gateway.admin.post(f"/v1/memories/{root['id']}/grants",
                                          json={"principal": ok, "privileges": ["read"]})
        assert answer.status_code == 201, (ok, answer.text)
    for bad in ("provider:native", "team:blue", "nobody", "member:", ":x", "member:mbr_does_not_exist"):
        answer = await gateway.admin.post(f"/v1/memories/{root['id']}/grants",
                                          json={"principal": bad, "privileges": ["read"]})
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["param"] == "principal"


async def test_unknown_privilege_is_refused(gateway: Gateway) -> None:
    """A privilege outside read, write, create, delete is 422."""
    root = await gateway.root()
    member_id, _ = await gateway.member("m")
    answer = await gateway.admin.post(f"/v1/memories/{root['id']}/grants",
                                      json={"principal": f"member:{member_id}", "privileges": ["admin"]})
    assert answer.status_code == 422


async def test_a_restricted_memory_stops_grants_from_above(gateway: Gateway) -> None:
    """A grant on the root does not reach a restricted child or anything below it."""
    root = await gateway.root()
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    below = await gateway.child(gateway.admin, private["id"], "Below")
    member_id, client = await gateway.member("m")
    await gateway.grant(root["id"], f"member:{member_id}", "read", "write")
    assert (await client.get(f"/v1/memories/{private['id']}")).status_code == 404
    assert (await client.get(f"/v1/memories/{below['id']}")).status_code == 404
    await gateway.grant(below["id"], f"member:{member_id}", "read")
    opened = await client.get(f"/v1/memories/{below['id']}")
    assert opened.status_code == 200
    assert opened.json()["ancestors"] == []  # the restricted parent stays hidden


async def test_group_grants_reach_people_and_agents_alike(gateway: Gateway) -> None:
    """A grant to a group gives the same access to a human member and an agent member of it."""
    root = await gateway.root()
    human_id, human = await gateway.member("person", "human")
    agent_id, agent = await gateway.member("bot", "agent")
    group = (await gateway.admin.post("/v1/groups", json={"name": "team"})).json()
    for member in (human_id, agent_id):
        await gateway.admin.put(f"/v1/groups/{group['id']}/members/{member}")
    await gateway.grant(root["id"], f"group:{group['id']}", "read")
    for client in (human, agent):
        got = await client.get(f"/v1/memories/{root['id']}")
        assert got.status_code == 200
        assert got.json()["privileges"] == ["read"]


async def test_changing_grants_needs_delete(gateway: Gateway) -> None:
    """A member with write but not delete cannot grant or revoke."""
    root = await gateway.root()
    member_id, client = await gateway.member("w")
    other_id, _ = await gateway.member("o")
    grant = await gateway.grant(root["id"], f"member:{member_id}", "read", "write")
    add = await client.post(f"/v1/memories/{root['id']}/grants",
                            json={"principal": f"member:{other_id}", "privileges": ["read"]})
    revoke = await client.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")
    assert add.status_code == revoke.status_code == 403


async def test_revoking_a_grant_removes_access(gateway: Gateway) -> None:
    """After DELETE of the only grant, the memory reads as missing to that member."""
    root = await gateway.root()
    member_id, client = await gateway.member("m")
    grant = await gateway.grant(root["id"], f"member:{member_id}", "read")
    assert (await client.get(f"/v1/memories/{root['id']}")).status_code == 200
    assert (await gateway.admin.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")).status_code == 200
    assert (await client.get(f"/v1/memories/{root['id']}")).status_code == 404


async def test_a_grant_on_an_ancestor_is_revoked_there_not_below(gateway: Gateway) -> None:
    """Revoking through a child a grant that sits on its parent is 404: grants are changed where they sit."""
    root = await gateway.root()
    child = await gateway.child(gateway.admin, root["id"], "Child")
    member_id, _ = await gateway.member("m")
    grant = await gateway.grant(root["id"], f"member:{member_id}", "read")
    answer = await gateway.admin.delete(f"/v1/memories/{child['id']}/grants/{grant['id']}")
    assert answer.status_code == 404
