"""The decision log through the API and the CLI: who may read it, what it records, tamper detection."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlalchemy import update

from gateway.audit.store import entries_table
from gateway.cli import main
from tests.api._gateway import Gateway


async def _entries(gateway: Gateway, **params: str) -> list[dict]:  # type: ignore[type-arg]
    await gateway.services.audit.flush()
    answer = await gateway.admin.get("/v1/audit", params={"limit": "1000", **params})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


async def test_every_decision_of_a_recall_is_logged_with_its_reason(gateway: Gateway) -> None:
    """A recall logs each covered memory with the grant and node that allowed it, and each skipped one
    with why not (cut off at a restricted node); a refused read is logged as a deny."""
    root = await gateway.root()
    open_child = await gateway.child(gateway.admin, root["id"], "Open")
    closed = await gateway.child(gateway.admin, root["id"], "Closed", restricted=True)
    member_id, client = await gateway.member("reader")
    grant = await gateway.grant(root["id"], f"member:{member_id}", "read")
    await client.post(f"/v1/memories/{root['id']}/recall", json={"text": "anything"})
    await client.get(f"/v1/memories/{closed['id']}")
    mine = await _entries(gateway, principal=f"member:{member_id}")
    covered = {e["memory_id"]: e for e in mine if e["operation"] == "recall.cover"}
    skipped = {e["memory_id"]: e for e in mine if e["operation"] == "recall.skip"}
    assert set(covered) == {root["id"], open_child["id"]}
    assert grant["id"] in covered[open_child["id"]]["reason"] and root["id"] in covered[open_child["id"]]["reason"]
    assert set(skipped) == {closed["id"]}
    assert f"cut off at restricted memory {closed['id']}" in skipped[closed["id"]]["reason"]
    denied = [e for e in mine if e["operation"] == "memories.get"]
    assert denied and denied[0]["decision"] == "deny"
    assert all(e["request_id"] and e["groups"] == [] for e in mine)


async def test_no_record_content_is_logged(gateway: Gateway) -> None:
    """What a record says never appears in the log."""
    root = await gateway.root()
    await gateway.admin.post(f"/v1/memories/{root['id']}/records", json={"content": "the launch code is 0000"})
    await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "launch code"})
    assert "launch code" not in json.dumps(await _entries(gateway))


async def test_filters_and_pagination(gateway: Gateway) -> None:
    """principal, operation and decision filter; pages of 2 cover every entry once."""
    root = await gateway.root()
    _, stranger = await gateway.member("stranger")
    for _ in range(3):
        await stranger.get(f"/v1/memories/{root['id']}")
    denials = await _entries(gateway, decision="deny", operation="memories.get")
    assert len(denials) == 3 and all(e["decision"] == "deny" for e in denials)
    everything = await _entries(gateway)
    seen: list[dict] = []  # type: ignore[type-arg]
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await gateway.admin.get("/v1/audit", params=params)).json()
        seen.extend(page["data"])
        cursor = page["next"]
        if not cursor:
            break
    # Each read stores what was decided before it, its own predecessors' reads among them: the log grows
    # at its end while it is paged through.
    assert [e["seq"] for e in seen[: len(everything)]] == [e["seq"] for e in everything]
    assert {e["operation"] for e in seen[len(everything) :]} <= {"audit.read"}


async def test_members_read_only_their_subtree_and_only_with_delete(gateway: Gateway) -> None:
    """A holder of delete reads entries about its subtree; without delete, or without memory_id, it cannot."""
    root = await gateway.root()
    team = await gateway.child(gateway.admin, root["id"], "Team")
    other = await gateway.child(gateway.admin, root["id"], "Other")
    owner_id, owner = await gateway.member("owner")
    await gateway.grant(team["id"], f"member:{owner_id}", "read", "delete")
    _, stranger = await gateway.member("stranger")
    await stranger.get(f"/v1/memories/{team['id']}")
    await stranger.get(f"/v1/memories/{other['id']}")
    await gateway.services.audit.flush()
    assert (await owner.get("/v1/audit")).status_code == 403
    assert (await owner.get("/v1/audit", params={"memory_id": other["id"]})).status_code == 404
    page = (await owner.get("/v1/audit", params={"memory_id": team["id"], "limit": "1000"})).json()
    memories = {e["memory_id"] for e in page["data"]}
    assert team["id"] in memories and other["id"] not in memories and root["id"] not in memories
    reader_id, reader = await gateway.member("reader")
    await gateway.grant(team["id"], f"member:{reader_id}", "read")
    assert (await reader.get("/v1/audit", params={"memory_id": team["id"]})).status_code == 403


async def test_verify_detects_an_edited_entry_and_says_where(gateway: Gateway,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """GET /v1/audit/verify and memfed audit verify pass on an untouched log and name the edited entry."""
    root = await gateway.root()
    await gateway.admin.get(f"/v1/memories/{root['id']}")
    await gateway.services.audit.flush()
    intact = (await gateway.admin.get("/v1/audit/verify")).json()
    assert intact["ok"] is True and intact["checked"] > 0
    data_dir = str(gateway.services.config.data_dir)
    assert await asyncio.to_thread(main, ["audit", "verify", "--data-dir", data_dir]) == 0
    async with gateway.services.store.engine.begin() as conn:
        await conn.execute(update(entries_table).where(entries_table.c.seq == 2).values(decision="deny"))
    broken = (await gateway.admin.get("/v1/audit/verify")).json()
    assert broken["ok"] is False and broken["broken_at"] == 2
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "verify", "--data-dir", data_dir]) == 1
    assert "BROKEN at entry 2" in capsys.readouterr().out
    _, member = await gateway.member("m")
    assert (await member.get("/v1/audit/verify")).status_code == 403


async def test_export_writes_ndjson_in_order(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    """memfed audit export prints one JSON entry a line, in sequence order, filtered as asked."""
    root = await gateway.root()
    _, stranger = await gateway.member("s")
    await stranger.get(f"/v1/memories/{root['id']}")
    await gateway.services.audit.flush()
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["audit", "export", "--data-dir", str(gateway.services.config.data_dir),
                                          "--decision", "deny"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and lines
    assert all(e["decision"] == "deny" for e in lines)
    assert [e["seq"] for e in lines] == sorted(e["seq"] for e in lines)


async def test_a_request_s_decisions_are_in_the_journal_when_its_answer_arrives(gateway: Gateway) -> None:
    """A request's decisions wait on the request and reach the journal before the answer, denials too."""
    root = await gateway.root()
    _, stranger = await gateway.member("stranger")
    journal = gateway.services.config.data_dir / "audit-journal"
    for client in (gateway.admin, stranger):
        answer = await client.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
        written = b"".join(p.read_bytes() for p in journal.glob("*.log"))
        assert answer.headers["x-request-id"].encode() in written, answer.status_code
