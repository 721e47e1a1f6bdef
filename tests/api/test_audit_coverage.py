"""A recall's decisions as coverage sets: stored once, read as one decision per memory, tamper-evident."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.audit import AuditLog, AuditQuery, Coverage, DecisionEntry
from gateway.audit import store as audit_store
from gateway.audit.store import coverage_items_table, coverage_table, entries_table
from gateway.cli import main
from tests.api._gateway import Gateway


async def _decisions(gateway: Gateway, **params: str) -> list[dict[str, Any]]:
    await gateway.services.audit.flush()
    answer = await gateway.admin.get("/v1/audit", params={"limit": "1000", **params})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


async def _tree(gateway: Gateway) -> tuple[dict[str, Any], list[dict[str, Any]], httpx.AsyncClient]:
    """A root with three children, one restricted; a reader granted read on the root."""
    root = await gateway.root()
    kids = [await gateway.child(gateway.admin, root["id"], f"Kid {i}", restricted=i == 2) for i in range(3)]
    reader_id, reader = await gateway.member("reader")
    await gateway.grant(root["id"], f"member:{reader_id}", "read")
    return root, kids, reader


async def _rows(gateway: Gateway, table: sa.Table) -> list[Any]:
    async with gateway.services.store.engine.connect() as conn:
        return list(await conn.execute(sa.select(table)))


async def test_repeated_recalls_store_one_entry_each_and_one_set(gateway: Gateway) -> None:
    """Each recall is one chain entry naming a coverage set; the same question stores its set once."""
    root, _kids, reader = await _tree(gateway)
    before = len(await _rows(gateway, entries_table))
    for _ in range(3):
        assert (await reader.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})).status_code == 200
    await gateway.services.audit.flush()
    added = (await _rows(gateway, entries_table))[before:]
    plans = [r for r in added if r.coverage is not None]
    assert len(plans) == 3 and len({r.coverage for r in plans}) == 1
    assert [r.operation for r in added].count("recall") == 3  # the route's own decision, one per recall
    sets = await _rows(gateway, coverage_table)
    assert plans[0].coverage in {s.digest for s in sets}


async def test_each_memory_decided_reads_as_its_own_decision(gateway: Gateway) -> None:
    """Filtering by memory, operation and decision finds the recall's decision about that memory."""
    root, kids, reader = await _tree(gateway)
    await reader.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    about_kid = await _decisions(gateway, memory_id=kids[1]["id"], operation="recall.cover")
    assert len(about_kid) == 1
    [one] = about_kid
    assert one["decision"] == "allow" and one["part"] >= 1 and len(one["coverage"]) == 64
    assert root["id"] in one["reason"]
    skipped = await _decisions(gateway, decision="deny", operation="recall.skip")
    assert [d["memory_id"] for d in skipped] == [kids[2]["id"]]
    assert "cut off at restricted memory" in skipped[0]["reason"]
    whole = [d for d in await _decisions(gateway) if d["request_id"] == one["request_id"]]
    assert {d["memory_id"] for d in whole if d["operation"].startswith("recall.")} == {
        root["id"], kids[0]["id"], kids[1]["id"], kids[2]["id"]}


async def test_pages_walk_every_decision_once_in_both_orders(gateway: Gateway) -> None:
    """Pages of 2 over entries holding sets of 4 decisions neither repeat nor skip any, either way."""
    root, _kids, reader = await _tree(gateway)
    for _ in range(3):
        await reader.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    await gateway.services.audit.flush()
    who = (await _decisions(gateway, operation="recall"))[0]["principal"]
    for order in ("oldest", "newest"):
        everything = await _decisions(gateway, order=order, principal=who)
        seen: list[tuple[int, int]] = []
        cursor = None
        while True:
            params = {"limit": "2", "order": order, "principal": who, **({"cursor": cursor} if cursor else {})}
            page = (await gateway.admin.get("/v1/audit", params=params)).json()
            seen.extend((d["seq"], d["part"]) for d in page["data"])
            if not (cursor := page["next"]):
                break
        assert seen == [(d["seq"], d["part"]) for d in everything]
        assert len(set(seen)) == len(seen) and sum(1 for _, part in seen if part) == 12


async def test_a_subtree_reader_sees_only_its_subtree_s_decisions(gateway: Gateway) -> None:
    """A holder of delete on one child reads that child's part of a root recall, never its siblings'."""
    root, kids, _ = await _tree(gateway)
    owner_id, owner = await gateway.member("owner")
    await gateway.grant(kids[0]["id"], f"member:{owner_id}", "read", "delete")
    await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    await gateway.services.audit.flush()
    page = (await owner.get("/v1/audit", params={"memory_id": kids[0]["id"], "limit": "1000"})).json()
    assert page["data"] and {d["memory_id"] for d in page["data"]} == {kids[0]["id"]}
    assert any(d["operation"] == "recall.cover" for d in page["data"])
    assert root["id"] not in json.dumps(page) and kids[1]["id"] not in json.dumps(page)
    # The root's grant decided: it is named only as inherited, without its grant id or principal.
    assert any(d["reason"].endswith("also inherited from above your reach") for d in page["data"])
    admin_grants = [g.id for g in gateway.services.store.tree.grants_on(root["id"])]
    assert not any(grant_id in json.dumps(page) for grant_id in admin_grants)


async def test_a_changed_tree_makes_a_new_plan(gateway: Gateway) -> None:
    """The kept plan is dropped when the tree changes: a child restricted afterwards is skipped."""
    root, kids, reader = await _tree(gateway)
    await reader.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    assert (await gateway.admin.put(f"/v1/memories/{kids[0]['id']}", json={"restricted": True})).status_code == 200
    await reader.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    about = await _decisions(gateway, memory_id=kids[0]["id"])
    assert [d["operation"] for d in about if d["operation"].startswith("recall.")] == ["recall.cover", "recall.skip"]


@pytest.mark.parametrize("tamper", ["body", "missing", "index"])
async def test_verify_catches_a_doctored_coverage_set(gateway: Gateway, tamper: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """An edited set, a deleted set or an index that no longer matches its set breaks verification at
    the entry naming it; the untouched log verifies."""
    root, _kids, _ = await _tree(gateway)
    await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    await gateway.services.audit.flush()
    assert (await gateway.admin.get("/v1/audit/verify")).json()["ok"] is True
    [plan] = [r for r in await _rows(gateway, entries_table) if r.coverage is not None]
    async with gateway.services.store.engine.begin() as conn:
        if tamper == "body":
            [found] = [s for s in await _rows(gateway, coverage_table) if s.digest == plan.coverage]
            edited = found.body.replace('"allow"', '"deny"', 1)
            await conn.execute(sa.update(coverage_table).where(coverage_table.c.digest == plan.coverage)
                               .values(body=edited))
        elif tamper == "missing":
            await conn.execute(sa.delete(coverage_table).where(coverage_table.c.digest == plan.coverage))
        else:
            i = coverage_items_table.c
            await conn.execute(sa.update(coverage_items_table).where(i.digest == plan.coverage, i.part == 2)
                               .values(memory_id="hmem_elsewhere"))
    report = (await gateway.admin.get("/v1/audit/verify")).json()
    assert report["ok"] is False and report["broken_at"] == plan.seq
    assert {"body": "was edited", "missing": "is missing", "index": "does not match"}[tamper] in report["problem"]


async def test_an_export_carries_the_sets_and_verifies_offline(gateway: Gateway,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """memfed audit export writes each set beside its entry; verify_lines passes it and catches an edit."""
    root, kids, _ = await _tree(gateway)
    await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})
    await gateway.services.audit.flush()
    capsys.readouterr()
    data_dir = str(gateway.services.config.data_dir)
    assert await asyncio.to_thread(main, ["audit", "export", "--data-dir", data_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    [plan] = [json.loads(line) for line in lines if '"covers"' in line]
    assert {c[1] for c in plan["covers"]} == {root["id"], *(k["id"] for k in kids)}
    assert audit_store.verify_lines(lines).ok
    edited = [line.replace(kids[0]["id"], kids[1]["id"]) if '"covers"' in line else line for line in lines]
    report = audit_store.verify_lines(edited)
    assert not report.ok and report.broken_at == plan["seq"] and "was edited" in (report.problem or "")


async def test_sets_are_journaled_once_per_process_and_survive_a_restart(engine: AsyncEngine, tmp_path: Path) -> None:
    """A set is written to the journal before the first entry naming it; after a restart it is written
    again, stored once, and every entry still reads back its decisions (SQLite and PostgreSQL)."""
    sets = Coverage.of([("recall.cover", f"hmem_{i}", "read", True, f"grant {i}") for i in range(3)])
    entry = DecisionEntry("req_1", "member:a", (), "recall.plan", "hmem_0", "read", True, "plan")
    for _ in range(2):
        log = AuditLog(engine, tmp_path / "data", flush_interval=60)
        await log.start()
        log.decide_plan(entry, sets)
        log.decide_plan(entry, sets)
        journal = b"".join(p.read_bytes() for p in (tmp_path / "data" / "audit-journal").glob("*.log"))
        assert journal.count(b"\nC") + journal.startswith(b"C") == 1
        await log.close()
    log = AuditLog(engine, tmp_path / "data")
    rows, _ = await log.query(AuditQuery(memory_id="hmem_2"))
    assert [(r["seq"], r["part"], r["reason"]) for r in rows] == [(n, 3, "grant 2") for n in range(1, 5)]
    assert (await log.verify()).ok
    rows, _ = await log.query(AuditQuery(operation="recall.cover", decision="allow", newest_first=True), limit=5)
    assert [(r["seq"], r["part"]) for r in rows] == [(4, 3), (4, 2), (4, 1), (3, 3), (3, 2)]
    async with engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(coverage_table))).scalar() == 1


def test_large_plans_split_into_bounded_sets() -> None:
    """A plan over thousands of memories becomes several sets, none past the size the journal reader takes."""
    decided = [("recall.cover", f"hmem_{i:05d}", "read", True, "r" * 300) for i in range(2500)]
    sets = Coverage.of(decided)
    assert len(sets) > 2 and sum(s.count for s in sets) == 2500
    assert all(len(s.body.encode()) <= 300 * 1024 for s in sets)
    assert [item[1] for s in sets for item in json.loads(s.body)] == [d[1] for d in decided]  # in order


async def test_an_older_log_gains_the_coverage_column(tmp_path: Path) -> None:
    """A database written before coverage sets existed is upgraded in place and keeps verifying."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/old.db")
    try:
        old = sa.MetaData()
        sa.Table("audit_entries", old, *(sa.Column(c.name, c.type, primary_key=c.primary_key)
                                         for c in entries_table.c if c.name != "coverage"))
        async with engine.begin() as conn:
            await conn.run_sync(old.create_all)
        log = AuditLog(engine, tmp_path / "data", flush_interval=60)
        await log.start()
        log.decide(DecisionEntry("req", "member:a", (), "memories.get", "hmem_a", "read", True, "grant"))
        await log.flush()
        assert (await log.verify()).ok
        await log.close()
    finally:
        await engine.dispose()
