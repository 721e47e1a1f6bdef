"""Members, keys and groups: admin-only routes, keys shown once and stored as hashes."""

from __future__ import annotations

from sqlalchemy import select

from gateway.state import schema as t
from tests.api._gateway import Gateway


async def test_admin_creates_member_and_key_that_authenticates(gateway: Gateway) -> None:
    """A member made by an admin gets a key, and the key acts as that member."""
    member_id, client = await gateway.member("dana", "agent")
    me = (await client.get("/v1/members/me")).json()
    assert me["id"] == member_id
    assert me["type"] == "agent"
    assert me["admin"] is False
    assert [set(k) for k in me["keys"]] == [{"id"}]
    assert "mf_" not in str(me)


async def test_key_is_stored_only_as_a_hash(gateway: Gateway) -> None:
    """The secret shown once never appears in the state store."""
    made = (await gateway.admin.post("/v1/members", json={"name": "eve", "type": "human"})).json()
    secret = (await gateway.admin.post(f"/v1/members/{made['id']}/keys")).json()["key"]
    async with gateway.services.store.engine.connect() as conn:
        rows = list(await conn.execute(select(t.api_keys)))
    assert rows
    assert all(secret not in tuple(str(v) for v in row) for row in rows)


async def test_revoked_key_stops_working_at_once(gateway: Gateway) -> None:
    """DELETE of a key makes the next request with it 401."""
    made = (await gateway.admin.post("/v1/members", json={"name": "fay", "type": "human"})).json()
    key = (await gateway.admin.post(f"/v1/members/{made['id']}/keys")).json()
    client = gateway.client(key["key"])
    assert (await client.get("/v1/members/me")).status_code == 200
    revoked = await gateway.admin.delete(f"/v1/members/{made['id']}/keys/{key['id']}")
    assert revoked.status_code == 200
    assert (await client.get("/v1/members/me")).status_code == 401


async def test_member_routes_are_admin_only(gateway: Gateway) -> None:
    """A member who is not an admin cannot create members, keys or groups."""
    member_id, client = await gateway.member("gus")
    attempts = [
        await client.post("/v1/members", json={"name": "x", "type": "human"}),
        await client.post(f"/v1/members/{member_id}/keys"),
        await client.post("/v1/groups", json={"name": "team"}),
    ]
    for answer in attempts:
        assert answer.status_code == 403
        assert answer.json()["error"]["type"] == "permission_error"


async def test_groups_membership_is_added_and_removed(gateway: Gateway) -> None:
    """PUT and DELETE /v1/groups/{gid}/members/{mid} change membership, shown on /members/me."""
    member_id, client = await gateway.member("hal", "agent")
    group = (await gateway.admin.post("/v1/groups", json={"name": "support"})).json()
    assert (await gateway.admin.put(f"/v1/groups/{group['id']}/members/{member_id}")).status_code == 200
    assert (await client.get("/v1/members/me")).json()["groups"] == [group["id"]]
    assert (await gateway.admin.delete(f"/v1/groups/{group['id']}/members/{member_id}")).status_code == 200
    assert (await client.get("/v1/members/me")).json()["groups"] == []


async def test_member_type_must_be_human_or_agent(gateway: Gateway) -> None:
    """type is human or agent; anything else is 422 in the envelope and nothing is created."""
    before = gateway.services.store.member_count()
    answer = await gateway.admin.post("/v1/members", json={"name": "robot", "type": "robot"})
    assert answer.status_code == 422
    assert answer.json()["error"]["param"] == "type"
    assert gateway.services.store.member_count() == before
