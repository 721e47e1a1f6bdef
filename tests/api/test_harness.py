"""Harnesses (§9): the agent's memories are read off the grants; two settings; turns recorded when observing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway


async def harness_for(gateway: Gateway, member_id: str, name: str = "support-bot") -> dict[str, Any]:
    made = await gateway.admin.post("/v1/harnesses", json={"name": name, "agent_member_id": member_id})
    assert made.status_code == 201, made.text
    return made.json()


async def memories_of(client: httpx.AsyncClient, harness_id: str) -> dict[str, Any]:
    got = await client.get(f"/v1/harnesses/{harness_id}/memories")
    assert got.status_code == 200, got.text
    return got.json()


async def test_a_new_harness_observes_and_holds_nothing(gateway: Gateway) -> None:
    """A new harness names its agent's principal, observes by default, has no default memory, and lists
    nothing while nothing is granted."""
    agent_id, _ = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    assert harness["id"].startswith("hrn_")
    settings = await memories_of(gateway.admin, harness["id"])
    assert settings == {"object": "harness.memories", "harness_id": harness["id"],
                        "principal": f"member:{agent_id}", "default_memory_id": None, "observe": True, "data": []}


async def test_data_follows_grants_as_they_change(gateway: Gateway) -> None:
    """A grant added shows in `data` at once with its privileges; revoked, it is gone at once."""
    agent_id, _ = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    grant = await gateway.grant(root["id"], f"member:{agent_id}", "read")
    data = (await memories_of(gateway.admin, harness["id"]))["data"]
    assert [(d["id"], d["privileges"], d["default"]) for d in data] == [(root["id"], ["read"], False)]
    revoked = await gateway.admin.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")
    assert revoked.status_code == 200
    assert (await memories_of(gateway.admin, harness["id"]))["data"] == []


async def test_group_grants_count_and_order_is_highest_first(gateway: Gateway) -> None:
    """A grant to a group the agent is in counts like its own; memories come highest in the tree first,
    each with the union of privileges that reach it."""
    agent_id, _ = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    team = await gateway.child(gateway.admin, root["id"], "Team")
    customer = await gateway.child(gateway.admin, team["id"], "Customer")
    await gateway.grant(customer["id"], f"member:{agent_id}", "write")
    group = (await gateway.admin.post("/v1/groups", json={"name": "support"})).json()
    joined = await gateway.admin.put(f"/v1/groups/{group['id']}/members/{agent_id}")
    assert joined.status_code == 200, joined.text
    await gateway.grant(team["id"], f"group:{group['id']}", "read")
    data = (await memories_of(gateway.admin, harness["id"]))["data"]
    assert [d["id"] for d in data] == [team["id"], customer["id"]]
    assert data[0]["privileges"] == ["read"]
    assert data[1]["privileges"] == ["read", "write"]


async def test_agent_and_person_are_read_the_same_way(gateway: Gateway) -> None:
    """A harness bound to a human member lists exactly what one bound to an agent with the same grants lists."""
    root = await gateway.root("Company")
    child = await gateway.child(gateway.admin, root["id"], "Notes")
    listed = []
    for member_type in ("agent", "human"):
        member_id, _ = await gateway.member(f"m-{member_type}", member_type)
        await gateway.grant(child["id"], f"member:{member_id}", "read", "write")
        harness = await harness_for(gateway, member_id, f"h-{member_type}")
        data = (await memories_of(gateway.admin, harness["id"]))["data"]
        listed.append([(d["id"], d["privileges"]) for d in data])
    assert listed[0] == listed[1] == [(child["id"], ["read", "write"])]


async def test_default_memory_must_be_writable_by_the_agent(gateway: Gateway) -> None:
    """A default the agent may only read, and one that does not exist, are refused alike with
    memory_invalid; a writable one is set and marked `default`."""
    agent_id, _ = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    notes = await gateway.child(gateway.admin, root["id"], "Agent notes")
    await gateway.grant(root["id"], f"member:{agent_id}", "read")
    await gateway.grant(notes["id"], f"member:{agent_id}", "write")
    url = f"/v1/harnesses/{harness['id']}/memories"
    refused = await gateway.admin.put(url, json={"default_memory_id": root["id"]})
    missing = await gateway.admin.put(url, json={"default_memory_id": "hmem_nope"})
    for answer in (refused, missing):
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "memory_invalid"
        assert answer.json()["error"]["param"] == "default_memory_id"
    assert refused.json()["error"]["message"] == missing.json()["error"]["message"]
    done = await gateway.admin.put(url, json={"default_memory_id": notes["id"]})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["default_memory_id"] == notes["id"]
    assert "notice" not in body  # the embedded provider is inside the server
    assert [(d["id"], d["default"]) for d in body["data"]] == [(root["id"], False), (notes["id"], True)]


async def test_observe_can_be_turned_off_and_default_cleared(gateway: Gateway) -> None:
    """PUT changes only the fields given: observe off keeps the default; default null clears it."""
    agent_id, _ = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    await gateway.grant(root["id"], f"member:{agent_id}", "write")
    url = f"/v1/harnesses/{harness['id']}/memories"
    await gateway.admin.put(url, json={"default_memory_id": root["id"]})
    off = (await gateway.admin.put(url, json={"observe": False})).json()
    assert (off["observe"], off["default_memory_id"]) == (False, root["id"])
    cleared = (await gateway.admin.put(url, json={"default_memory_id": None})).json()
    assert (cleared["observe"], cleared["default_memory_id"]) == (False, None)
    empty = await gateway.admin.put(url, json={})
    assert empty.status_code == 422


async def test_only_admins_and_the_agent_itself_reach_a_harness(gateway: Gateway) -> None:
    """The harness's agent may read and set its settings; another member is told it does not exist
    (as for a missing one); only an admin creates a harness."""
    agent_id, agent = await gateway.member("bot", "agent")
    _, other = await gateway.member("mallory", "human")
    harness = await harness_for(gateway, agent_id)
    assert (await agent.get(f"/v1/harnesses/{harness['id']}")).status_code == 200
    assert (await agent.put(f"/v1/harnesses/{harness['id']}/memories", json={"observe": False})).status_code == 200
    for path in (f"/v1/harnesses/{harness['id']}", f"/v1/harnesses/{harness['id']}/memories",
                 "/v1/harnesses/hrn_missing/memories"):
        answer = await other.get(path)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "memfed_harness_not_found"
    assert (await other.get("/v1/harnesses")).json()["data"] == []
    assert [h["id"] for h in (await agent.get("/v1/harnesses")).json()["data"]] == [harness["id"]]
    refused = await agent.post("/v1/harnesses", json={"name": "x", "agent_member_id": agent_id})
    assert refused.status_code == 403
    unknown = await gateway.admin.post("/v1/harnesses", json={"name": "x", "agent_member_id": "mbr_nope"})
    assert unknown.status_code == 422


async def test_a_finished_turn_is_an_episode_in_the_default_memory(gateway: Gateway) -> None:
    """With observe on, a turn becomes one `episode` record in the default memory, roles kept and the
    writer stamped; with observe off nothing is written."""
    agent_id, agent = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    await gateway.grant(root["id"], f"member:{agent_id}", "read", "write")
    await agent.put(f"/v1/harnesses/{harness['id']}/memories", json={"default_memory_id": root["id"]})
    parts = [{"type": "text", "text": "Where is my parcel?", "role": "user"},
             {"type": "text", "text": "It ships Monday.", "role": "assistant"}]
    turn = await agent.post(f"/v1/harnesses/{harness['id']}/turns", json={"parts": parts})
    assert turn.status_code == 201, turn.text
    body = turn.json()
    assert body["observed"] is True and body["job"] is None
    [episode] = body["records"]
    assert episode["type"] == "episode"
    assert [(p["role"], p["text"]) for p in episode["content"]] == [
        ("user", "Where is my parcel?"), ("assistant", "It ships Monday.")]
    assert episode["written_by"] == {"kind": "member", "id": agent_id, "type": "agent"}
    await agent.put(f"/v1/harnesses/{harness['id']}/memories", json={"observe": False})
    skipped = await agent.post(f"/v1/harnesses/{harness['id']}/turns", json={"parts": parts})
    assert skipped.json() == {"object": "harness.turn", "harness_id": harness["id"], "observed": False,
                              "reason": "observe is off"}
    listed = (await agent.get(f"/v1/memories/{root['id']}/records", params={"type": "episode"})).json()
    assert len(listed["data"]) == 1


async def test_a_revoked_write_stops_turns_and_is_reported(gateway: Gateway) -> None:
    """Grants are read at every turn: after the agent loses write on its default memory a turn is refused
    with memory_invalid and the settings carry a warning, instead of turns being dropped in silence."""
    agent_id, agent = await gateway.member("bot", "agent")
    harness = await harness_for(gateway, agent_id)
    root = await gateway.root("Company")
    grant = await gateway.grant(root["id"], f"member:{agent_id}", "write")
    await agent.put(f"/v1/harnesses/{harness['id']}/memories", json={"default_memory_id": root["id"]})
    await gateway.admin.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")
    turn = await agent.post(f"/v1/harnesses/{harness['id']}/turns",
                            json={"parts": [{"type": "text", "text": "hi", "role": "user"}]})
    assert turn.status_code == 422
    assert turn.json()["error"]["code"] == "memory_invalid"
    settings = await memories_of(agent, harness["id"])
    assert settings["x.memfed"]["warnings"]


async def test_a_default_outside_the_server_carries_a_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§9.1: setting a default memory whose provider is not the embedded one tells the person that every
    turn will be sent to that provider."""
    fake = FakeMem0("oss")
    monkeypatch.setenv("MEMFED_TEST_MEM0_KEY", fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {"adapter": "mem0", "variant": "oss", "base_url": fake.base_url,
                                                     "api_key_env": "MEMFED_TEST_MEM0_KEY"}})
    async with running_gateway(config, http_client=fake.client()) as gw:
        agent_id, _ = await gw.member("bot", "agent")
        harness = await harness_for(gw, agent_id)
        outside = await gw.root("Vendor notes", provider="m0")
        await gw.grant(outside["id"], f"member:{agent_id}", "write")
        done = await gw.admin.put(f"/v1/harnesses/{harness['id']}/memories",
                                  json={"default_memory_id": outside["id"]})
        assert done.status_code == 200, done.text
        assert "every turn" in done.json()["notice"]
        assert "'m0'" in done.json()["notice"]
