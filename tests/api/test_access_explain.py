"""Why may X do Y: the derivation of a principal's privileges, for admins and for holders of delete."""

from __future__ import annotations

from tests.api._gateway import Gateway


async def test_derivation_names_each_grant_its_node_and_group(gateway: Gateway) -> None:
    """A member's privileges come from a direct grant on the root and a group grant on the child."""
    root = await gateway.root()
    child = await gateway.child(gateway.admin, root["id"], "Child")
    member_id, _ = await gateway.member("x")
    group = (await gateway.admin.post("/v1/groups", json={"name": "writers"})).json()
    await gateway.admin.put(f"/v1/groups/{group['id']}/members/{member_id}")
    direct = await gateway.grant(root["id"], f"member:{member_id}", "read")
    via_group = await gateway.grant(child["id"], f"group:{group['id']}", "write")
    answer = await gateway.admin.get(f"/v1/memories/{child['id']}/access",
                                     params={"principal": f"member:{member_id}"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["privileges"] == ["read", "write"]
    assert body["groups"] == [f"group:{group['id']}"]
    got = {(g["grant_id"], g["memory_id"], g["via_group"]) for g in body["grants"]}
    assert got == {(direct["id"], root["id"], False), (via_group["id"], child["id"], True)}
    assert body["cutoff_at"] is None
    assert body["reasons"]["delete"].startswith("refused")


async def test_derivation_says_where_a_cutoff_stops_inheritance(gateway: Gateway) -> None:
    """Below a restricted memory the root's grant does not count, and cutoff_at names the restricted node."""
    root = await gateway.root()
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    member_id, _ = await gateway.member("x")
    await gateway.grant(root["id"], f"member:{member_id}", "read")
    body = (await gateway.admin.get(f"/v1/memories/{private['id']}/access",
                                    params={"principal": f"member:{member_id}"})).json()
    assert body["privileges"] == []
    assert body["cutoff_at"] == private["id"]
    assert "cut off" in body["reasons"]["read"]


async def test_only_admins_and_holders_of_delete_may_ask(gateway: Gateway) -> None:
    """A reader gets 403; a stranger 404; a holder of delete gets the answer without hidden node ids."""
    root = await gateway.root()
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    subject_id, _ = await gateway.member("subject")
    await gateway.grant(root["id"], f"member:{subject_id}", "read")
    reader_id, reader = await gateway.member("reader")
    await gateway.grant(private["id"], f"member:{reader_id}", "read")
    owner_id, owner = await gateway.member("owner")
    await gateway.grant(private["id"], f"member:{owner_id}", "delete")
    _, stranger = await gateway.member("stranger")
    params = {"principal": f"member:{subject_id}"}
    assert (await reader.get(f"/v1/memories/{private['id']}/access", params=params)).status_code == 403
    assert (await stranger.get(f"/v1/memories/{private['id']}/access", params=params)).status_code == 404
    seen = await owner.get(f"/v1/memories/{private['id']}/access", params=params)
    assert seen.status_code == 200
    assert root["id"] not in seen.text  # the owner cannot see the root above the cutoff


async def test_unknown_principal_is_422(gateway: Gateway) -> None:
    """Asking about a principal that does not exist is 422."""
    root = await gateway.root()
    answer = await gateway.admin.get(f"/v1/memories/{root['id']}/access", params={"principal": "member:nobody"})
    assert answer.status_code == 422
