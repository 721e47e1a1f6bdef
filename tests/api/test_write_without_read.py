"""A member that may write a memory but not read it gets nothing to read from a write (issue 9 item 6):
remember, revise, forget, a type's operation and observe answer it with an acknowledgement (the record's
id, memory, version and status), and the record itself only to a caller holding `read`.

The `gateway` fixture is tests/api/conftest.py's (an in-process app on the embedded provider); it is typed
`Any` here rather than imported, so that no test imports from a conftest.
"""

from __future__ import annotations

from typing import Any

import httpx

SECRET = "The Acme discount is forty percent"
TASK = {"type": "x.task", "title": "Renew the Acme contract quietly", "content": SECRET,
        "attributes": {"status": "open", "due": "2026-10-09", "assignee": "Dana"}}
ACKNOWLEDGEMENT = {"object", "id", "memory_id", "version", "status"}


async def setting(gateway: Any) -> tuple[str, str, httpx.AsyncClient, httpx.AsyncClient]:
    """A memory with a record the admin wrote; one member holding write alone, one holding read and write."""
    memory = (await gateway.root("Board"))["id"]
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json=TASK)
    assert made.status_code == 201, made.text
    writer_id, writer = await gateway.member("writer", "agent")
    reader_id, reader = await gateway.member("reader", "agent")
    await gateway.grant(memory, f"member:{writer_id}", "write")
    await gateway.grant(memory, f"member:{reader_id}", "read", "write")
    return memory, made.json()["id"], writer, reader


def acknowledged(body: dict[str, Any], *, version: int, status: str) -> None:
    assert set(body) == ACKNOWLEDGEMENT, body
    assert (body["object"], body["version"], body["status"]) == ("memory.record.acknowledgement", version, status)


async def test_a_revise_by_a_writer_who_cannot_read_is_acknowledged_without_the_record(gateway: Any) -> None:
    """Revising only the title answers the writer with id, version and status, never the content it did
    not state; a reader-writer's revise answers the whole record."""
    memory, record, writer, reader = await setting(gateway)
    answer = await writer.patch(f"/v1/memories/{memory}/records/{record}", json={"title": "Renewal"})
    assert answer.status_code == 200, answer.text
    acknowledged(answer.json(), version=2, status="active")
    assert answer.json()["id"] == record and answer.json()["memory_id"] == memory
    assert SECRET not in answer.text and "assignee" not in answer.text

    full = await reader.patch(f"/v1/memories/{memory}/records/{record}", json={"title": "Renewal, again"})
    assert full.status_code == 200 and full.json()["content"] == [{"type": "text", "text": SECRET}]


async def test_a_forget_by_a_writer_who_cannot_read_is_acknowledged_without_the_record(gateway: Any) -> None:
    """forget repeats the last content in the version it writes; the writer gets only that it is forgotten."""
    memory, record, writer, _ = await setting(gateway)
    answer = await writer.delete(f"/v1/memories/{memory}/records/{record}")
    assert answer.status_code == 200, answer.text
    acknowledged(answer.json(), version=2, status="forgotten")
    assert SECRET not in answer.text and "quietly" not in answer.text


async def test_a_remember_by_a_writer_who_cannot_read_is_acknowledged(gateway: Any) -> None:
    """remember answers 201 with the new record's id and version (what a later revise or forget names)."""
    memory, _, writer, reader = await setting(gateway)
    answer = await writer.post(f"/v1/memories/{memory}/records", json={"content": "Written blind."})
    assert answer.status_code == 201, answer.text
    acknowledged(answer.json(), version=1, status="active")
    stored = await reader.get(f"/v1/memories/{memory}/records/{answer.json()['id']}")
    assert stored.json()["content"] == [{"type": "text", "text": "Written blind."}]


async def test_an_operation_by_a_writer_who_cannot_read_carries_no_record(gateway: Any) -> None:
    """complete (requires write) changes the task; its answer to a writer that cannot read names the new
    version in an acknowledgement, not the task's title and content."""
    memory, record, writer, reader = await setting(gateway)
    answer = await writer.post(f"/v1/memories/{memory}/records/{record}/operations/complete", json={})
    assert answer.status_code == 200, answer.text
    acknowledged(answer.json()["record"], version=2, status="active")
    assert SECRET not in answer.text and "quietly" not in answer.text and "Dana" not in answer.text

    again = await reader.post(f"/v1/memories/{memory}/records/{record}/operations/reschedule",
                              json={"input": {"due": "2026-11-01"}})
    assert again.status_code == 200 and again.json()["record"]["title"] == TASK["title"]


async def test_an_observe_by_a_writer_who_cannot_read_is_acknowledged_per_record(gateway: Any) -> None:
    """observe answers 201 with one acknowledgement per record written, and the records to a reader."""
    memory, _, writer, reader = await setting(gateway)
    answer = await writer.post(f"/v1/memories/{memory}/observe", json={"episodes": [
        {"content": "First blind episode."}, {"content": "Second blind episode."}]})
    assert answer.status_code == 201, answer.text
    records = answer.json()["records"]
    assert len(records) == 2
    for body in records:
        acknowledged(body, version=1, status="active")
    assert "blind episode" not in answer.text

    seen = await reader.post(f"/v1/memories/{memory}/observe", json={"episodes": [{"content": "Seen episode."}]})
    assert seen.status_code == 201
    assert seen.json()["records"][0]["content"] == [{"type": "text", "text": "Seen episode."}]


async def test_a_turn_recorded_for_an_agent_that_cannot_read_is_acknowledged(gateway: Any) -> None:
    """A harness's finished turn is observed into its default memory: an agent that may write it but not
    read it is answered with an acknowledgement of the episode, not the episode."""
    agent_id, agent = await gateway.member("bot", "agent")
    made = await gateway.admin.post("/v1/harnesses", json={"name": "desk", "agent_member_id": agent_id})
    assert made.status_code == 201, made.text
    harness = made.json()["id"]
    memory = (await gateway.root("Inbox"))["id"]
    await gateway.grant(memory, f"member:{agent_id}", "write")
    settings = await agent.put(f"/v1/harnesses/{harness}/memories", json={"default_memory_id": memory})
    assert settings.status_code == 200, settings.text
    turn = await agent.post(f"/v1/harnesses/{harness}/turns",
                            json={"parts": [{"type": "text", "text": "A turn kept blind.", "role": "user"}]})
    assert turn.status_code == 201, turn.text
    [episode] = turn.json()["records"]
    acknowledged(episode, version=1, status="active")
    assert "kept blind" not in turn.text
