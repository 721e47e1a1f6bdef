"""Types and operations over HTTP (§8): the listing, an operation under the memory's access, the schema
of a registered type on write, and recall through a type's text projection."""

from __future__ import annotations

from typing import Any

from adapters.base import NewRecord, Record
from tests.api._gateway import Gateway

TASK = {"type": "x.task", "title": "Renew the Acme contract", "content": "Send the renewal offer.",
        "attributes": {"status": "open", "due": "2026-10-09", "assignee": "Dana"}}


class Untyped:
    """The embedded provider with its types hidden: a provider that registers none."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def capabilities(self) -> Any:
        return self._inner.capabilities()

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        return await self._inner.remember(memory_id, record)

    async def get(self, memory_id: str, record_id: str, as_of: Any = None) -> Record:
        return await self._inner.get(memory_id, record_id, as_of)

    async def close(self) -> None:
        await self._inner.close()


async def _task(gateway: Gateway) -> tuple[str, str]:
    memory = (await gateway.root("Board"))["id"]
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json=TASK)
    assert made.status_code == 201, made.text
    return memory, made.json()["id"]


def _op(memory: str, record: str, name: str) -> str:
    return f"/v1/memories/{memory}/records/{record}/operations/{name}"


async def test_the_listing_has_the_core_types_and_every_registered_one(gateway: Gateway) -> None:
    """GET /v1/memories/types (matched before /v1/memories/{id}) lists the six core types and the
    provider's x.task, with its schema, its text projection and each operation's input and privilege."""
    answer = await gateway.admin.get("/v1/memories/types")
    assert answer.status_code == 200, answer.text
    data = {entry["type"]: entry for entry in answer.json()["data"]}
    assert list(data)[:6] == ["episode", "fact", "note", "procedure", "link", "entity"]
    assert data["fact"]["operations"] == [] and data["fact"]["x.memfed"]["core"] is True
    task = data["x.task"]
    assert task["schema"]["properties"]["status"]["enum"] == ["open", "done"]
    assert "assignee" in task["text"]
    assert {op["name"]: op["requires"] for op in task["operations"]} == {
        "complete": "write", "reschedule": "write", "summary": "read"}
    assert task["x.memfed"] == {"core": False, "providers": ["local"]}
    assert answer.json()["degraded"] == []


async def test_the_listing_needs_a_caller(gateway: Gateway) -> None:
    """Like the capability documents, the listing is for authenticated callers only."""
    assert (await gateway.client(None).get("/v1/memories/types")).status_code == 401


async def test_a_provider_that_registers_none_lists_the_core_types(gateway: Gateway) -> None:
    """§8: a provider that registers no type answers the listing with the core types, and an operation
    on its memory is memory_unsupported."""
    memory, record = await _task(gateway)
    handle = gateway.services.providers.handles["local"]
    handle.provider = Untyped(handle.provider)  # type: ignore[assignment]
    listing = (await gateway.admin.get("/v1/memories/types")).json()["data"]
    assert [entry["type"] for entry in listing] == ["episode", "fact", "note", "procedure", "link", "entity"]
    answer = await gateway.admin.post(_op(memory, record, "complete"), json={})
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "memory_unsupported")


async def test_an_operation_needs_the_privilege_it_requires(gateway: Gateway) -> None:
    """complete requires write and summary read, each checked on the memory: a reader may summarise and
    not complete, a writer may complete and not summarise, and a stranger is told the memory does not
    exist. The version complete appends is stamped with the member who ran it."""
    memory, record = await _task(gateway)
    reader_id, reader = await gateway.member("reader", "agent")
    writer_id, writer = await gateway.member("writer", "agent")
    _, stranger = await gateway.member("stranger", "agent")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    await gateway.grant(memory, f"member:{writer_id}", "write")

    refused = await reader.post(_op(memory, record, "complete"), json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "memory_forbidden")
    summary = await reader.post(_op(memory, record, "summary"), json={})
    assert summary.status_code == 200, summary.text
    assert summary.json()["result"]["summary"].startswith("Renew the Acme contract")
    assert summary.json()["record"] is None

    done = await writer.post(_op(memory, record, "complete"), json={"input": {}})
    assert done.status_code == 200, done.text
    # The writer cannot read the memory: it is told which version it wrote, and the reader sees the rest.
    assert (done.json()["record"]["object"], done.json()["record"]["version"]) == ("memory.record.acknowledgement", 2)
    written = (await reader.get(f"/v1/memories/{memory}/records/{record}")).json()
    assert (written["version"], written["attributes"]["status"]) == (2, "done")
    assert written["written_by"] == {"kind": "member", "id": writer_id, "type": "agent"}
    refused = await writer.post(_op(memory, record, "summary"), json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "memory_forbidden")

    hidden = await stranger.post(_op(memory, record, "summary"), json={})
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "memory_not_found")


async def test_operation_errors_come_in_the_envelope(gateway: Gateway) -> None:
    """An operation no type has is 404, one the record's type lacks (a fact) 422, input that breaks the
    operation's schema 422, and a record not in the memory 404; none of them writes anything."""
    memory, record = await _task(gateway)
    fact = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "content": "x"})).json()
    cases = [
        (_op(memory, record, "explode"), {}, 404, "memfed_operation_not_found"),
        (_op(memory, fact["id"], "complete"), {}, 422, "memory_invalid"),
        (_op(memory, record, "reschedule"), {"input": {"due": "whenever"}}, 422, "memory_invalid"),
        (_op(memory, record, "reschedule"), {"input": {}}, 422, "memory_invalid"),
        (_op(memory, record, "complete"), {"input": [1]}, 422, "memory_invalid"),
        (_op(memory, "hrec_" + "0" * 32, "complete"), {}, 404, "memory_record_not_found"),
    ]
    for path, body, status, code in cases:
        answer = await gateway.admin.post(path, json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), (path, answer.text)
    history = await gateway.admin.get(f"/v1/memories/{memory}/records/{record}/history")
    assert len(history.json()["data"]) == 1


async def test_reschedule_appends_a_version_with_the_new_date(gateway: Gateway) -> None:
    memory, record = await _task(gateway)
    moved = await gateway.admin.post(_op(memory, record, "reschedule"), json={"input": {"due": "2026-11-02"}})
    assert moved.status_code == 200, moved.text
    assert moved.json()["result"] == {"due": "2026-11-02", "changed": True}
    got = (await gateway.admin.get(f"/v1/memories/{memory}/records/{record}")).json()
    assert (got["version"], got["attributes"]["due"]) == (2, "2026-11-02")


async def test_a_registered_type_is_checked_on_write_and_others_are_carried(gateway: Gateway) -> None:
    """Attributes of x.task that break its schema are memory_invalid, on remember and on revise; an x.
    type no provider registers is kept with whatever attributes it states."""
    memory, record = await _task(gateway)
    bad = await gateway.admin.post(f"/v1/memories/{memory}/records",
                                   json={**TASK, "attributes": {"status": "someday"}})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "memory_invalid")
    bad = await gateway.admin.patch(f"/v1/memories/{memory}/records/{record}",
                                    json={"attributes": {"due": "tomorrow"}})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "memory_invalid")
    free = await gateway.admin.post(f"/v1/memories/{memory}/records", json={
        "type": "x.calendar.event", "content": "Sync", "attributes": {"status": "someday", "n": [1]}})
    assert free.status_code == 201, free.text
    assert free.json()["attributes"] == {"status": "someday", "n": [1]}


async def test_recall_finds_a_task_through_its_text_projection(gateway: Gateway) -> None:
    """§8: a task is found by recall through its text projection: its assignee and its status are
    words of the search, though neither is in its title or content; after complete, "done" finds it."""
    memory, record = await _task(gateway)
    await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "note", "content": "Unrelated."})

    async def found(text: str) -> list[str]:
        answer = await gateway.admin.post(f"/v1/memories/{memory}/recall", json={"text": text})
        assert answer.status_code == 200, answer.text
        return [hit["record"]["id"] for hit in answer.json()["results"]]

    assert await found("Dana") == [record]
    assert await found("open") == [record]
    assert await found("done") == []
    await gateway.admin.post(_op(memory, record, "complete"), json={})
    assert await found("done") == [record]
    assert await found("Dana done") == [record]
