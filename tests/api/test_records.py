"""Records on the embedded provider (§4, §5, §7): writing, reading, versions, removal, files."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from tests.api._gateway import Gateway


async def _memory(gateway: Gateway) -> str:
    return (await gateway.root("Notes"))["id"]


async def test_a_string_is_one_text_part_and_reads_back_as_a_list(gateway: Gateway) -> None:
    """content "x" is shorthand for [{"type":"text","text":"x"}]; reads carry trust untrusted."""
    memory = await _memory(gateway)
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "content": "hello"})
    assert made.status_code == 201
    got = (await gateway.admin.get(f"/v1/memories/{memory}/records/{made.json()['id']}")).json()
    assert got["content"] == [{"type": "text", "text": "hello"}]
    assert got["trust"] == "untrusted"
    assert got["version"] == 1 and got["status"] == "active" and got["supersedes"] is None


async def test_writer_and_written_at_are_stamped_not_read(gateway: Gateway) -> None:
    """written_by and time.written_at in a request are ignored; the server stamps the caller and its clock."""
    memory = await _memory(gateway)
    member_id, client = await gateway.member("agent-7", "agent")
    await gateway.grant(memory, f"member:{member_id}", "read", "write")
    before = datetime.now(UTC)
    made = await client.post(f"/v1/memories/{memory}/records", json={
        "content": "stated", "written_by": {"kind": "member", "id": "someone-else"},
        "time": {"written_at": "2001-01-01T00:00:00Z", "valid_from": "2026-01-01T00:00:00Z"}})
    assert made.status_code == 201, made.text
    record = made.json()
    assert record["written_by"] == {"kind": "member", "id": member_id, "type": "agent"}
    assert datetime.fromisoformat(record["time"]["written_at"].replace("Z", "+00:00")) >= before.replace(
        microsecond=0)
    assert record["time"]["valid_from"] == "2026-01-01T00:00:00.000Z"


async def test_parts_keep_their_order_and_extension_parts_are_carried(gateway: Gateway) -> None:
    """text, file and x.-prefixed parts come back in order, the x. part unchanged."""
    memory = await _memory(gateway)
    upload = await gateway.admin.post("/v1/files", files={"file": ("logo.png", b"\x89PNG...", "image/png")},
                                      data={"purpose": "memory"})
    assert upload.status_code == 201, upload.text
    file_id = upload.json()["id"]
    parts = [
        {"type": "text", "text": "The new logo.", "role": "user"},
        {"type": "file", "file": {"id": file_id, "name": "ignored.txt", "bytes": 1}, "text": "A blue circle.",
         "text_source": "stated"},
        {"type": "x.chart", "series": [1, 2, 3], "nested": {"k": "v"}},
    ]
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "x.design", "content": parts})
    assert made.status_code == 201, made.text
    content = made.json()["content"]
    assert [p["type"] for p in content] == ["text", "file", "x.chart"]
    assert content[0]["role"] == "user"
    assert content[1]["file"] == {"id": file_id, "name": "logo.png", "media_type": "image/png", "bytes": 7}
    assert content[2] == {"type": "x.chart", "series": [1, 2, 3], "nested": {"k": "v"}}
    assert made.json()["type"] == "x.design"
    raw = await gateway.admin.get(f"/v1/memories/{memory}/records/{made.json()['id']}/content/1")
    assert raw.status_code == 200
    assert raw.content == b"\x89PNG..."
    assert raw.headers["content-type"] == "image/png"
    assert (await gateway.admin.get(f"/v1/memories/{memory}/records/{made.json()['id']}/content/0")).status_code == 404


async def test_another_principals_file_reads_as_missing(gateway: Gateway) -> None:
    """A file part naming someone else's upload is 404; nothing is written."""
    memory = await _memory(gateway)
    member_id, client = await gateway.member("m")
    await gateway.grant(memory, f"member:{member_id}", "read", "write")
    upload = (await gateway.admin.post("/v1/files", files={"file": ("a.txt", b"abc", "text/plain")})).json()
    answer = await client.post(f"/v1/memories/{memory}/records",
                               json={"content": [{"type": "file", "file": {"id": upload["id"]}}]})
    assert answer.status_code == 404
    assert (await client.get(f"/v1/files/{upload['id']}")).status_code == 404
    listing = (await gateway.admin.get(f"/v1/memories/{memory}/records")).json()
    assert listing["data"] == []


async def test_a_file_over_the_limit_is_413(tmp_path) -> None:
    """An upload larger than files.max_bytes is 413 file_too_large with detail.max_bytes."""
    from tests.api._gateway import make_config, running_gateway

    async with running_gateway(make_config(tmp_path, files={"max_bytes": 10})) as gw:
        answer = await gw.admin.post("/v1/files", files={"file": ("big.bin", b"x" * 11)})
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "file_too_large"
        assert answer.json()["error"]["detail"]["max_bytes"] == 10


async def test_a_record_asked_for_through_another_memory_is_not_found(gateway: Gateway) -> None:
    """A record id asked for through a memory it is not in is 404 memory_record_not_found, even a parent."""
    root = await gateway.root()
    child = await gateway.child(gateway.admin, root["id"], "Child")
    other = await gateway.root("Other")
    made = (await gateway.admin.post(f"/v1/memories/{child['id']}/records", json={"content": "x"})).json()
    for wrong in (root["id"], other["id"]):
        answer = await gateway.admin.get(f"/v1/memories/{wrong}/records/{made['id']}")
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "memory_record_not_found"
        patch = await gateway.admin.patch(f"/v1/memories/{wrong}/records/{made['id']}", json={"title": "t"})
        assert patch.status_code == 404


async def test_revise_appends_a_version_and_history_keeps_both(gateway: Gateway) -> None:
    """PATCH writes version 2 superseding 1; history returns both, oldest first, each with its writer."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "content": "v1"})).json()
    revised = await gateway.admin.patch(f"/v1/memories/{memory}/records/{made['id']}", json={"content": "v2"})
    assert revised.status_code == 200
    assert (revised.json()["version"], revised.json()["supersedes"], revised.json()["id"]) == (2, 1, made["id"])
    assert revised.json()["type"] == "fact"
    history = (await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}/history")).json()["data"]
    assert [(v["version"], v["status"], v["content"][0]["text"]) for v in history] == [
        (1, "superseded", "v1"), (2, "active", "v2")]
    assert all(v["written_by"]["kind"] == "member" for v in history)


async def test_revise_with_null_clears_a_title_or_validity_and_omitted_fields_stay(gateway: Gateway) -> None:
    """PATCH `title: null` and `time.valid_to: null` empty them; fields left out keep their values."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={
        "content": "v1", "title": "Kept?", "time": {"valid_from": "2026-01-01T00:00:00Z",
                                                    "valid_to": "2027-01-01T00:00:00Z"}})).json()
    path = f"/v1/memories/{memory}/records/{made['id']}"
    kept = (await gateway.admin.patch(path, json={"content": "v2"})).json()
    assert kept["title"] == "Kept?" and kept["time"]["valid_to"] is not None
    cleared = await gateway.admin.patch(path, json={"title": None, "time": {"valid_to": None}})
    assert cleared.status_code == 200, cleared.text
    body = cleared.json()
    assert body.get("title") is None and body["time"].get("valid_to") is None
    assert body["time"]["valid_from"] is not None and body["content"][0]["text"] == "v2"


async def test_forget_closes_the_record_and_keeps_its_trace(gateway: Gateway) -> None:
    """DELETE of a record: it leaves the listing, include=all shows it forgotten, history keeps it."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "bye"})).json()
    forgotten = await gateway.admin.delete(f"/v1/memories/{memory}/records/{made['id']}")
    assert forgotten.status_code == 200
    assert forgotten.json()["status"] == "forgotten"
    assert (await gateway.admin.get(f"/v1/memories/{memory}/records")).json()["data"] == []
    everything = (await gateway.admin.get(f"/v1/memories/{memory}/records", params={"include": "all"})).json()
    assert [r["status"] for r in everything["data"]] == ["forgotten"]
    history = (await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}/history")).json()["data"]
    assert [v["status"] for v in history][-1] == "forgotten"


async def test_erase_removes_content_and_reports_unreachable(gateway: Gateway) -> None:
    """erase needs delete, answers erased and unreachable, and the record cannot be read again."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "secret"})).json()
    writer_id, writer = await gateway.member("w")
    await gateway.grant(memory, f"member:{writer_id}", "read", "write")
    assert (await writer.post(f"/v1/memories/{memory}/erase", json={"record_ids": [made["id"]]})).status_code == 403
    erased = await gateway.admin.post(f"/v1/memories/{memory}/erase", json={"record_ids": [made["id"]]})
    assert erased.status_code == 200
    assert erased.json() == {"object": "memory.erasure", "memory_id": memory, "erased": [made["id"]],
                             "unreachable": []}
    assert (await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}")).status_code == 404
    history = await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}/history")
    assert history.status_code == 404 or history.json()["data"] == []


async def test_list_filters_by_type_and_pages(gateway: Gateway) -> None:
    """GET records accepts type and pages with limit/next without loss or repetition."""
    memory = await _memory(gateway)
    for i in range(5):
        await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "content": f"f{i}"})
    await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "note", "content": "n"})
    facts: list[str] = []
    cursor = None
    while True:
        params = {"type": "fact", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await gateway.admin.get(f"/v1/memories/{memory}/records", params=params)).json()
        facts.extend(r["content"][0]["text"] for r in page["data"])
        cursor = page["next"]
        if not cursor:
            break
    assert sorted(facts) == [f"f{i}" for i in range(5)]


async def test_as_of_reads_the_memory_as_it_stood(gateway: Gateway) -> None:
    """get and list with as_of (or a snapshot's time) return the version current then."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "before"})).json()
    await asyncio.sleep(0.01)
    snap = await gateway.admin.post(f"/v1/memories/{memory}/snapshots", json={"name": "v1", "message": "first"})
    assert snap.status_code == 201
    await asyncio.sleep(0.01)
    await gateway.admin.patch(f"/v1/memories/{memory}/records/{made['id']}", json={"content": "after"})
    at = snap.json()["at"]
    old = (await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}", params={"as_of": at})).json()
    assert old["content"][0]["text"] == "before"
    listing = (await gateway.admin.get(f"/v1/memories/{memory}/records", params={"as_of": at})).json()
    assert [r["content"][0]["text"] for r in listing["data"]] == ["before"]
    snapshots = (await gateway.admin.get(f"/v1/memories/{memory}/snapshots")).json()["data"]
    assert [s["name"] for s in snapshots] == ["v1"]


async def test_references_are_resolved_for_each_reader(gateway: Gateway) -> None:
    """A reader without read on the target sees {record_id, available: false} and nothing else."""
    root = await gateway.root()
    public = await gateway.child(gateway.admin, root["id"], "Public")
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    source = (await gateway.admin.post(f"/v1/memories/{private['id']}/records", json={"content": "src"})).json()
    made = (await gateway.admin.post(f"/v1/memories/{public['id']}/records", json={
        "content": "promoted", "references": [
            {"rel": "derived_from", "memory_id": private["id"], "record_id": source["id"]}]})).json()
    member_id, reader = await gateway.member("reader")
    await gateway.grant(public["id"], f"member:{member_id}", "read", "write")
    seen = (await reader.get(f"/v1/memories/{public['id']}/records/{made['id']}")).json()
    assert seen["references"] == [{"record_id": source["id"], "available": False}]
    owner_view = (await gateway.admin.get(f"/v1/memories/{public['id']}/records/{made['id']}")).json()
    assert owner_view["references"] == [{"memory_id": private["id"], "record_id": source["id"],
                                         "available": True, "rel": "derived_from"}]
    # A reviser cannot remove what it was shown as unavailable: the reference survives its revision.
    revised = await reader.patch(f"/v1/memories/{public['id']}/records/{made['id']}", json={"references": []})
    assert revised.status_code == 200
    again = (await gateway.admin.get(f"/v1/memories/{public['id']}/records/{made['id']}")).json()
    assert [r["record_id"] for r in again["references"]] == [source["id"]]


async def test_at_most_one_subject_and_one_object(gateway: Gateway) -> None:
    """A record naming a second subject is 422 memory_invalid and is not written."""
    memory = await _memory(gateway)
    a = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "entity", "title": "A"})).json()
    b = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "entity", "title": "B"})).json()
    refs = [{"rel": "subject", "memory_id": memory, "record_id": a["id"]},
            {"rel": "subject", "memory_id": memory, "record_id": b["id"]}]
    answer = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "title": "x",
                                                                              "references": refs})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "memory_invalid"
    facts = (await gateway.admin.get(f"/v1/memories/{memory}/records", params={"type": "fact"})).json()
    assert facts["data"] == []


async def test_idempotency_key_returns_the_first_result(gateway: Gateway) -> None:
    """The same Idempotency-Key and body writes once; a different body with it is refused."""
    memory = await _memory(gateway)
    headers = {"Idempotency-Key": "k-1"}
    first = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "once"}, headers=headers)
    second = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "once"}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["idempotent-replayed"] == "true"
    other = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "twice"}, headers=headers)
    assert other.status_code == 422
    listing = (await gateway.admin.get(f"/v1/memories/{memory}/records")).json()
    assert len(listing["data"]) == 1


async def test_concurrent_requests_with_one_key_write_once(gateway: Gateway) -> None:
    """Two requests racing with the same key: the second waits and gets the first's answer."""
    memory = await _memory(gateway)
    headers = {"Idempotency-Key": "race"}
    answers = await asyncio.gather(*(
        gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "r"}, headers=headers)
        for _ in range(5)))
    assert len({a.json()["id"] for a in answers}) == 1
    assert len((await gateway.admin.get(f"/v1/memories/{memory}/records")).json()["data"]) == 1


async def test_reading_needs_read_and_writing_needs_write(gateway: Gateway) -> None:
    """A reader gets 403 memory_forbidden on remember; a writer without read gets 403 on get."""
    memory = await _memory(gateway)
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "x"})).json()
    reader_id, reader = await gateway.member("r")
    writer_id, writer = await gateway.member("w")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    await gateway.grant(memory, f"member:{writer_id}", "write")
    no_write = await reader.post(f"/v1/memories/{memory}/records", json={"content": "y"})
    no_read = await writer.get(f"/v1/memories/{memory}/records/{made['id']}")
    assert no_write.status_code == no_read.status_code == 403
    assert no_write.json()["error"]["code"] == "memory_forbidden"
