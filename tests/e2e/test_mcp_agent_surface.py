"""The agent surface as §9 and §4.1 say (issue 10, item 10): an unaddressed remember goes to the default
memory of the session's harness, and an episode is never revised, over MCP as over the API.

An MCP session names its harness in one of two ways (README, "MCP"): `?harness_id=` on the MCP URL, or,
without it, the caller's only harness (the one whose agent it is).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e._mcp_client import Served, call, serving, text_of


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as server:
        yield server


async def harness(served: Served, agent_id: str, name: str, default: str | None) -> str:
    gw = served.gw
    made = await gw.admin.post("/v1/harnesses", json={"name": name, "agent_member_id": agent_id})
    assert made.status_code == 201, made.text
    if default is not None:
        put = await gw.admin.put(f"/v1/harnesses/{made.json()['id']}/memories", json={"default_memory_id": default})
        assert put.status_code == 200, put.text
    return str(made.json()["id"])


async def texts_in(served: Served, memory_id: str) -> list[str]:
    listed = await served.gw.admin.get(f"/v1/memories/{memory_id}/records")
    return [r["content"][0]["text"] for r in listed.json()["data"]]


async def writable(served: Served, agent_id: str, *names: str) -> list[str]:
    gw = served.gw
    root = await gw.root("Company")
    await gw.grant(root["id"], f"member:{agent_id}", "read", "write")
    return [(await gw.child(gw.admin, root["id"], name))["id"] for name in names]


async def test_an_unaddressed_remember_goes_to_the_default_memory_of_the_agents_only_harness(
        served: Served) -> None:
    """An agent with one harness, whose MCP URL names none: memory_remember without memory_id writes to
    that harness's default_memory_id, stamped with the agent."""
    agent_id, _, key = await served.key_for("bot")
    notes, other = await writable(served, agent_id, "Notes", "Other")
    await harness(served, agent_id, "desk", notes)
    async with served.session(key) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert "memory_id" not in tools["memory_remember"].input_schema.get("required", [])
        made = await call(session, "memory_remember", content="Unaddressed note.")
    assert not made.is_error, text_of(made)
    assert made.structured_content["memory_id"] == notes
    assert made.structured_content["written_by"]["id"] == agent_id
    assert await texts_in(served, notes) == ["Unaddressed note."]
    assert await texts_in(served, other) == []


async def test_the_harness_named_in_the_mcp_url_decides_and_several_without_one_are_refused(
        served: Served) -> None:
    """With two harnesses, `?harness_id=` on the MCP URL picks whose default an unaddressed remember goes
    to; without it the call is refused, saying how to name one, and nothing is written."""
    agent_id, _, key = await served.key_for("bot")
    first, second = await writable(served, agent_id, "First", "Second")
    one = await harness(served, agent_id, "one", first)
    two = await harness(served, agent_id, "two", second)
    async with served.session(key, path=f"/mcp?harness_id={two}") as session:
        to_two = await call(session, "memory_remember", content="For two.")
    async with served.session(key, path=f"/mcp?harness_id={one}") as session:
        to_one = await call(session, "memory_remember", content="For one.")
    async with served.session(key) as session:
        unnamed = await call(session, "memory_remember", content="For whom?")
        addressed = await call(session, "memory_remember", memory_id=first, content="Addressed.")
    assert not to_two.is_error and not to_one.is_error, (text_of(to_two), text_of(to_one))
    assert await texts_in(served, second) == ["For two."]
    assert sorted(await texts_in(served, first)) == ["Addressed.", "For one."]
    assert unnamed.is_error
    assert unnamed.structured_content["error"]["code"] == "memory_invalid"
    assert "harness_id" in unnamed.structured_content["error"]["message"]
    assert not addressed.is_error


@pytest.mark.parametrize("case", ["no-harness", "no-default", "not-its-harness", "unknown-harness"])
async def test_an_unaddressed_remember_with_no_default_to_go_to_is_refused(served: Served, case: str) -> None:
    """No harness, a harness without a default, a harness of another agent or none at all named in the
    URL: memory_invalid on memory_id, saying why, and nothing is written anywhere."""
    agent_id, _, key = await served.key_for("bot")
    other_id, _, _ = await served.key_for("other")
    (notes,) = await writable(served, agent_id, "Notes")
    await served.gw.grant(notes, f"member:{other_id}", "read", "write")
    path = "/mcp"
    if case == "no-default":
        await harness(served, agent_id, "desk", None)
    elif case == "not-its-harness":
        path = f"/mcp?harness_id={await harness(served, other_id, 'theirs', notes)}"
    elif case == "unknown-harness":
        await harness(served, agent_id, "desk", notes)
        path = "/mcp?harness_id=hrn_00000000000000000000000000000000"
    async with served.session(key, path=path) as session:
        refused = await call(session, "memory_remember", content="Where to?")
    assert refused.is_error, text_of(refused)
    error: dict[str, Any] = refused.structured_content["error"]
    assert (error["code"], error["param"]) == ("memory_invalid", "memory_id"), error
    assert await texts_in(served, notes) == []


async def test_an_episode_is_not_revised_over_mcp(served: Served) -> None:
    """memory_revise of an episode is the API's 422 memory_invalid, and the episode keeps one version."""
    agent_id, _, key = await served.key_for("bot")
    (notes,) = await writable(served, agent_id, "Notes")
    async with served.session(key) as session:
        made = await call(session, "memory_remember", memory_id=notes, type="episode", content="user: hi")
        assert not made.is_error, text_of(made)
        record_id = made.structured_content["id"]
        revised = await call(session, "memory_revise", memory_id=notes, record_id=record_id, content="user: bye")
        history = await call(session, "memory_get", memory_id=notes, record_id=record_id, history=True)
    assert revised.is_error
    assert revised.structured_content["error"]["code"] == "memory_invalid"
    assert [v["content"][0]["text"] for v in history.structured_content["data"]] == ["user: hi"]


async def test_a_harness_id_in_the_mcp_url_that_is_no_id_is_422_in_the_envelope(served: Served) -> None:
    """`/mcp?harness_id=` with something no id looks like is refused before the SDK sees the request."""
    _, _, key = await served.key_for("bot")
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=served.url) as raw:
        for bad in ("a/../b", "", "x y"):
            answer = await raw.post("/mcp", params={"harness_id": bad}, json=message, headers=headers)
            assert answer.status_code == 422, (bad, answer.text)
            error = answer.json()["error"]
            assert (error["code"], error["param"]) == ("memory_invalid", "harness_id")
