"""The decision log's engine: journal, batching into the hash chain, reading, verification, export.

Runs against SQLite and (marked `postgres`) PostgreSQL, each test in its own database or schema.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import itertools
import json
import re
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.audit import REASON_CAP, AuditLog, AuditQuery, DecisionEntry
from gateway.audit import chain as audit_chain
from gateway.audit import lines as audit_lines
from gateway.audit import store as audit_store
from gateway.audit.journal import JournalKey, journal_id
from gateway.audit.query import ENTRY, InvalidCursor, stamp
from gateway.audit.store import FIELDS, GENESIS, chain_hash, entries_table, head_table

BASE = datetime(2026, 10, 4, 12, 0, 0, tzinfo=UTC)
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

OpenLog = Callable[..., Awaitable[AuditLog]]


@pytest.fixture
async def open_log(engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[OpenLog]:
    """Start AuditLogs on the test database and one data dir (flushing only when asked); close them after."""
    made: list[AuditLog] = []

    async def make(**options: Any) -> AuditLog:
        options.setdefault("flush_interval", 60.0)
        log = AuditLog(engine, tmp_path / "data", **options)
        await log.start()
        made.append(log)
        return log

    yield make
    for log in made:
        await log.close()


def decision(i: int, **changes: Any) -> DecisionEntry:
    """Entry i of a varied, predictable set: 3 principals, 3 memories (one None), 3 operations, allow/deny."""
    base = DecisionEntry(
        request_id=f"req_{i:04d}",
        principal=("member:ann", "member:bob", "member:cy")[i % 3],
        groups=(("group:eng",), ("group:eng", "group:sales"), ())[i % 3],
        operation=("recall", "write", "read")[i % 3 if i % 5 else 1],
        memory_id=("hmem_a", "hmem_b", None)[i % 4 % 3],
        privilege=None if i % 4 == 2 else "read",
        allowed=i % 2 == 0,
        reason=f"reason {i}: allowed by grant hgrt_{i} on hmem_a" if i % 2 == 0 else f"refused {i}: no grant",
        at=BASE + timedelta(minutes=i, milliseconds=i),
    )
    return dataclasses.replace(base, **changes)


async def filled(open_log: OpenLog, n: int, **options: Any) -> tuple[AuditLog, list[DecisionEntry]]:
    log = await open_log(**options)
    made = [decision(i) for i in range(n)]
    for entry in made:
        log.decide(entry)
    await log.flush()
    return log, made


async def everything(log: AuditLog, query: AuditQuery | None = None) -> list[dict[str, Any]]:
    rows, cursor = await log.query(query or AuditQuery(), None, 1000)
    assert cursor is None
    return rows


# --------------------------------------------------------------------------- writing and reading


async def test_entries_are_stored_in_decision_order_with_every_field(open_log: OpenLog) -> None:
    """Each decision becomes one entry, numbered in the order decided, carrying exactly its fields."""
    log, made = await filled(open_log, 9)
    rows = await everything(log)
    assert [r["seq"] for r in rows] == list(range(1, 10))
    for row, entry in zip(rows, made, strict=True):
        assert list(row) == list(ENTRY) and row["part"] == 0 and row["coverage"] is None
        assert row["request_id"] == entry.request_id
        assert row["principal"] == entry.principal
        assert row["groups"] == list(entry.groups)
        assert (row["operation"], row["memory_id"], row["privilege"]) == (
            entry.operation, entry.memory_id, entry.privilege,
        )  # fmt: skip
        assert row["decision"] == ("allow" if entry.allowed else "deny")
        assert row["reason"] == entry.reason
        assert row["at"] == stamp(entry.at) and STAMP.match(row["at"])
    assert rows[0]["prev_hash"] == GENESIS
    assert all(b["prev_hash"] == a["hash"] == chain_hash(a) for a, b in itertools.pairwise(rows))


def test_decision_entry_has_no_room_for_record_content() -> None:
    """DecisionEntry holds the decision's fields only; nothing else can be attached to it."""
    names = [f.name for f in dataclasses.fields(DecisionEntry)]
    assert names == ["request_id", "principal", "groups", "operation", "memory_id", "privilege",
                     "allowed", "reason", "at", "client_request_id"]  # fmt: skip
    entry = decision(1)
    with pytest.raises((AttributeError, TypeError)):
        entry.content = "the record's text"  # type: ignore[attr-defined]
    assert not hasattr(entry, "__dict__")


async def test_long_values_are_cut_and_marked(open_log: OpenLog) -> None:
    """A reason longer than the cap is stored cut, ending in an ellipsis; the chain stays valid."""
    log = await open_log()
    log.decide(decision(1, reason="x" * 100_000, principal="member:" + "p" * 1000))
    await log.flush()
    [row] = await everything(log)
    assert len(row["reason"]) == REASON_CAP and row["reason"].endswith("…")
    assert len(row["principal"]) == 256 and row["principal"].endswith("…")
    assert (await log.verify()).ok


async def test_values_that_need_the_json_line_come_back_exactly(open_log: OpenLog) -> None:
    """Separators, newlines and a group named "" take the JSON journal line and are stored unchanged."""
    log = await open_log()
    odd = [decision(1, reason="two\nlines"), decision(2, principal="member:a\x1fb"),
           decision(3, groups=("group:a\x1eb", "group:c")), decision(4, groups=("",)),
           decision(5, memory_id="", privilege="")]  # fmt: skip
    assert [audit_lines.line(e)[:1] for e in odd] == [b"["] * 4 + [b"1"]
    for entry in odd:
        log.decide(entry)
    await log.flush()
    rows = await everything(log)
    assert rows[0]["reason"] == "two\nlines" and rows[1]["principal"] == "member:a\x1fb"
    assert rows[2]["groups"] == ["group:a\x1eb", "group:c"] and rows[3]["groups"] == [""]
    assert (rows[4]["memory_id"], rows[4]["privilege"]) == (None, None)  # empty reads back as none
    assert (await log.verify()).ok


async def test_odd_text_survives_the_round_trip(open_log: OpenLog) -> None:
    """Non-ASCII text is kept; NUL (which PostgreSQL cannot store) becomes U+FFFD; the chain verifies."""
    log = await open_log()
    log.decide(decision(1, principal="member:zoë", groups=("group:日本", "group:\x00x"), reason="ok \u2028 é"))
    await log.flush()
    [row] = await everything(log)
    assert row["principal"] == "member:zoë"
    assert row["groups"] == ["group:日本", "group:\ufffdx"]
    assert row["reason"] == "ok \u2028 é"
    assert (await log.verify()).ok


FILTERS: dict[str, tuple[AuditQuery, Callable[[DecisionEntry], bool]]] = {
    "principal": (AuditQuery(principal="member:bob"), lambda e: e.principal == "member:bob"),
    "memory": (AuditQuery(memory_id="hmem_a"), lambda e: e.memory_id == "hmem_a"),
    "memory set": (
        AuditQuery(memory_ids=frozenset({"hmem_a", "hmem_b"})),
        lambda e: e.memory_id in {"hmem_a", "hmem_b"},
    ),
    "empty memory set": (AuditQuery(memory_ids=frozenset()), lambda e: False),
    "operation": (AuditQuery(operation="write"), lambda e: e.operation == "write"),
    "allow": (AuditQuery(decision="allow"), lambda e: e.allowed),
    "deny": (AuditQuery(decision="deny"), lambda e: not e.allowed),
    "since": (AuditQuery(since=BASE + timedelta(minutes=20)), lambda e: e.at >= BASE + timedelta(minutes=20)),
    "until": (AuditQuery(until=BASE + timedelta(minutes=7)), lambda e: e.at < BASE + timedelta(minutes=7)),
    "time range": (
        AuditQuery(since=BASE + timedelta(minutes=5), until=BASE + timedelta(minutes=15)),
        lambda e: BASE + timedelta(minutes=5) <= e.at < BASE + timedelta(minutes=15),
    ),
    "combined": (
        AuditQuery(principal="member:ann", decision="deny", memory_ids=frozenset({"hmem_a", "hmem_b"})),
        lambda e: e.principal == "member:ann" and not e.allowed and e.memory_id in {"hmem_a", "hmem_b"},
    ),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
async def test_each_filter_returns_exactly_the_matching_entries(open_log: OpenLog, name: str) -> None:
    """Every filter (and a combination) returns the entries a plain Python predicate picks, in order."""
    query, keep = FILTERS[name]
    log, made = await filled(open_log, 40)
    expected = [e.request_id for e in made if keep(e)]
    assert [r["request_id"] for r in await everything(log, query)] == expected
    if name != "empty memory set":
        assert 0 < len(expected) < len(made)


@pytest.mark.parametrize("newest_first", [False, True])
async def test_pagination_neither_repeats_nor_loses_entries(open_log: OpenLog, newest_first: bool) -> None:
    """Walking pages of 4 (filtered or not, either order) visits every matching entry once."""
    log, made = await filled(open_log, 23)
    for query in (AuditQuery(newest_first=newest_first), AuditQuery(decision="deny", newest_first=newest_first)):
        seen: list[int] = []
        cursor: str | None = None
        while True:
            rows, cursor = await log.query(query, cursor, 4)
            assert len(rows) <= 4
            seen.extend(r["seq"] for r in rows)
            if cursor is None:
                break
        expected = [i + 1 for i, e in enumerate(made) if query.decision is None or not e.allowed]
        assert seen == (expected[::-1] if newest_first else expected)


async def test_a_foreign_cursor_is_refused(open_log: OpenLog) -> None:
    """A cursor that is garbage, or from the other listing order, raises InvalidCursor."""
    log, _ = await filled(open_log, 5)
    _, cursor = await log.query(AuditQuery(), None, 2)
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        await log.query(AuditQuery(newest_first=True), cursor, 2)
    with pytest.raises(InvalidCursor):
        await log.query(AuditQuery(), "not-a-cursor!", 2)
    with pytest.raises(ValueError, match="decision"):
        AuditQuery(decision="maybe")


async def test_export_is_ndjson_in_sequence_order(open_log: OpenLog) -> None:
    """export writes one canonical JSON entry per line, in seq order, and the export verifies on its own."""
    log, made = await filled(open_log, 12)
    out = io.StringIO()
    assert await log.export(out) == 12
    lines = out.getvalue().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["seq"] for e in entries] == list(range(1, 13))
    assert [e["request_id"] for e in entries] == [m.request_id for m in made]
    assert all(sorted(e) == sorted(FIELDS) for e in entries)
    assert audit_store.verify_lines(lines).ok
    lines[4] = lines[4].replace('"decision":"allow"', '"decision":"deny"')
    report = audit_store.verify_lines(lines)
    assert (report.ok, report.broken_at) == (False, 5)


async def test_export_accepts_an_async_writer_and_filters(open_log: OpenLog) -> None:
    """export awaits an async `write` and honours the same filters as query."""
    log, made = await filled(open_log, 10)
    got: list[str] = []

    class Sink:
        async def write(self, line: str) -> None:
            got.append(line)

    assert await log.export(Sink(), AuditQuery(principal="member:cy")) == len(got)
    assert [json.loads(x)["request_id"] for x in got] == [m.request_id for m in made if m.principal == "member:cy"]


# --------------------------------------------------------------------------- the journal and the flusher


async def test_decisions_made_before_start_are_kept(engine: AsyncEngine, tmp_path: Path) -> None:
    """A decision taken before start() is journaled at start and stored first."""
    log = AuditLog(engine, tmp_path / "data", flush_interval=60)
    log.decide(decision(0))
    await log.start()
    log.decide(decision(1))
    await log.flush()
    assert [r["request_id"] for r in await everything(log)] == ["req_0000", "req_0001"]
    await log.close()


async def test_decide_never_raises(open_log: OpenLog) -> None:
    """Malformed entries are stored coerced, and deciding on a closed log drops quietly (and counts)."""
    log = await open_log()
    log.decide(DecisionEntry("req_x", "member:ann", None, "read", 42, None, True, object()))  # type: ignore[arg-type]
    log.decide(None)  # type: ignore[arg-type]
    await log.flush()
    rows = await everything(log)
    assert [r["operation"] for r in rows] == ["read", "audit.unencodable"]
    assert rows[0]["memory_id"] == "42" and rows[0]["groups"] == []
    await log.close()
    log.decide(decision(3))
    assert log.stats()["dropped"] == 1


async def test_disabled_log_records_nothing(open_log: OpenLog) -> None:
    """With enabled=False decide is a no-op; the tables still exist so reading works."""
    log = await open_log(enabled=False)
    log.decide(decision(1))
    await log.flush()
    assert await everything(log) == []
    assert (await log.verify()).ok


async def test_flusher_commits_on_its_interval(open_log: OpenLog) -> None:
    """Without flush(), entries reach the table by themselves within a few intervals."""
    log = await open_log(flush_interval=0.02)
    for i in range(5):
        log.decide(decision(i))
    for _ in range(500):
        if len(await everything(log)) == 5:
            break
        await asyncio.sleep(0.02)
    assert len(await everything(log)) == 5


async def test_a_full_batch_wakes_the_flusher(open_log: OpenLog) -> None:
    """batch_size waiting decisions wake the flusher long before its (here: one hour) interval."""
    log = await open_log(flush_interval=3600, batch_size=10)
    for i in range(10):
        log.decide(decision(i))
    for _ in range(500):
        if len(await everything(log)) == 10:
            break
        await asyncio.sleep(0.02)
    assert len(await everything(log)) == 10


async def test_segments_rotate_and_committed_ones_are_deleted(open_log: OpenLog, tmp_path: Path) -> None:
    """A segment past segment_bytes is rotated; once committed it is deleted; nothing is stored twice."""
    log = await open_log(segment_bytes=1500)
    for i in range(60):
        log.decide(decision(i))
        if i % 7 == 6:
            await log.flush()
    await log.flush()
    segments = sorted((tmp_path / "data" / "audit-journal").glob("*.log"))
    assert [p.name for p in segments] != ["000000000001.log"] and len(segments) <= 2
    assert [r["request_id"] for r in await everything(log)] == [f"req_{i:04d}" for i in range(60)]
    assert (await log.verify()).ok


async def test_one_process_per_journal(open_log: OpenLog, engine: AsyncEngine, tmp_path: Path) -> None:
    """A second AuditLog on a journal in use refuses to start."""
    await open_log()
    with pytest.raises(RuntimeError, match="in use"):
        await AuditLog(engine, tmp_path / "data").start()


async def test_a_restart_continues_the_chain(open_log: OpenLog) -> None:
    """After close and a new start, numbering and chaining carry on from the stored head."""
    first, _ = await filled(open_log, 4)
    await first.close()
    second = await open_log()
    second.decide(decision(4))
    await second.flush()
    rows = await everything(second)
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    assert (await second.verify()).ok


async def test_a_torn_journal_line_is_noted_on_the_chain(open_log: OpenLog, engine: AsyncEngine, tmp_path: Path):
    """A half-written last line (a crash mid-write) becomes an `audit.journal_unreadable` entry, not a stall."""
    journal = tmp_path / "data" / "audit-journal"
    journal.mkdir(parents=True)
    key = JournalKey.of(journal, journal_id(journal / "journal-id"), None)  # lines as the gateway tags them
    whole = key.tag(7, 0, [audit_lines.line(decision(1))])
    torn = key.tag(7, len(whole), [audit_lines.line(decision(2))])
    (journal / "000000000007.log").write_bytes(whole + torn[: len(torn) // 2])
    log = await open_log()
    rows = await everything(log)
    assert [r["request_id"] for r in rows] == ["req_0001", ""]
    assert rows[1]["operation"] == "audit.journal_unreadable" and "segment 7" in rows[1]["reason"]
    assert not (journal / "000000000007.log").exists()
    assert (await log.verify()).ok


async def test_decide_from_many_threads(open_log: OpenLog) -> None:
    """Decisions from worker threads are journaled whole: each stored exactly once, chain valid."""
    log = await open_log()

    def work(t: int) -> None:
        for i in range(300):
            log.decide(decision(i, request_id=f"t{t}-{i}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    await log.flush()
    ids: list[str] = []
    cursor: str | None = None
    while True:
        rows, cursor = await log.query(AuditQuery(), cursor, 1000)
        ids.extend(r["request_id"] for r in rows)
        if cursor is None:
            break
    assert sorted(ids) == sorted(f"t{t}-{i}" for t in range(6) for i in range(300))
    for t in range(6):
        mine = [x for x in ids if x.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(300)]
    assert (await log.verify()).ok


# --------------------------------------------------------------------------- tampering


async def _rows(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(sa.select(entries_table).order_by(entries_table.c.seq))
        return [dict(r._mapping) for r in result]


async def tamper(engine: AsyncEngine, how: str, k: int) -> None:
    """Alter the stored log as an attacker with SQL access would (the head record left alone)."""
    t, c = entries_table, entries_table.c
    rows = await _rows(engine)
    async with engine.begin() as conn:
        if how == "edit":
            await conn.execute(sa.update(t).where(c.seq == k).values(reason=c.reason + " (amended)"))
        elif how == "delete":
            await conn.execute(sa.delete(t).where(c.seq == k))
        elif how == "delete_renumber":
            await conn.execute(sa.delete(t).where(c.seq == k))
            await conn.execute(sa.update(t).where(c.seq > k).values(seq=c.seq + 1_000_000))
            await conn.execute(sa.update(t).where(c.seq > 1_000_000).values(seq=c.seq - 1_000_001))
        elif how == "insert":  # a forged entry after entry k, with a correctly computed hash
            await conn.execute(sa.update(t).where(c.seq > k).values(seq=c.seq + 1_000_000))
            await conn.execute(sa.update(t).where(c.seq > 1_000_000).values(seq=c.seq - 999_999))
            prev = rows[k - 1]["hash"] if k else GENESIS
            forged = {**rows[0], "seq": k + 1, "prev_hash": prev, "reason": "forged", "request_id": "req_forged"}
            forged["groups"] = json.loads(forged.pop("groups_json"))
            forged["hash"] = chain_hash(forged)
            forged["groups_json"] = json.dumps(forged.pop("groups"), separators=(",", ":"))
            await conn.execute(sa.insert(t).values(**forged))
        elif how == "swap":  # entries k and k+1 trade places
            a, b = rows[k - 1], rows[k]
            await conn.execute(sa.update(t).where(c.seq == k).values({**b, "seq": k}))
            await conn.execute(sa.update(t).where(c.seq == k + 1).values({**a, "seq": k + 1}))
        else:
            raise AssertionError(how)


async def test_an_untouched_log_verifies(open_log: OpenLog) -> None:
    """verify() passes an empty log and an untouched one, counting every entry."""
    log = await open_log()
    assert (await log.verify()) == audit_store.VerifyReport(True, 0)
    for i in range(30):
        log.decide(decision(i))
    await log.flush()
    report = await log.verify()
    assert (report.ok, report.checked, report.broken_at, report.problem) == (True, 30, None, None)


@pytest.mark.parametrize(
    ("how", "k", "broken_at", "says"),
    [
        ("edit", 4, 4, "edited"),
        ("edit", 10, 10, "edited"),
        ("delete", 4, 4, "missing"),
        ("delete", 1, 1, "missing"),
        ("delete", 10, 10, "missing from the end"),
        ("delete_renumber", 4, 4, "does not link"),
        ("insert", 4, 5, "inserted"),
        ("insert", 0, 1, "inserted"),
        ("insert", 10, 11, "inserted"),
        ("swap", 4, 4, "reordered"),
        ("swap", 9, 9, "reordered"),
    ],
)
async def test_verify_finds_where_the_chain_breaks(
    open_log: OpenLog, engine: AsyncEngine, how: str, k: int, broken_at: int, says: str
) -> None:
    """An edited, deleted, inserted or reordered entry is detected, at the right sequence number."""
    log, _ = await filled(open_log, 10)
    await log.close()
    await tamper(engine, how, k)
    report = await AuditLog(engine, Path("/nonexistent")).verify()
    assert (report.ok, report.broken_at) == (False, broken_at), report
    assert says in (report.problem or "")
    assert report.checked == broken_at - 1


async def test_a_live_log_notices_a_rewritten_tail(open_log: OpenLog, engine: AsyncEngine) -> None:
    """Cutting the last entries and fixing the head record fools a cold check, not the running gateway."""
    log, _ = await filled(open_log, 10)
    rows = await _rows(engine)
    async with engine.begin() as conn:
        await conn.execute(sa.delete(entries_table).where(entries_table.c.seq > 7))
        await conn.execute(sa.update(head_table).values(seq=7, hash=rows[6]["hash"]))
    cold = await AuditLog(engine, Path("/nonexistent")).verify()
    assert cold.ok  # the limit of a plain hash chain: a consistent rewrite of the end
    live = await log.verify()
    assert (live.ok, live.broken_at) == (False, 8)


TAMPERS = st.sampled_from(["edit", "delete", "delete_renumber", "insert", "swap"])


def _expected(how: str, k: int) -> int:
    """Where a tampering shows: at the entry itself; an inserted entry after k shows at k + 1."""
    return k + 1 if how == "insert" else k


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(
        st.tuples(st.text(max_size=20), st.lists(st.text(max_size=8), max_size=3), st.booleans(), st.text()),
        min_size=2,
        max_size=25,
    ),
    how=TAMPERS,
    pick=st.floats(min_value=0, max_value=1, exclude_max=True),
)
def test_any_single_tampering_is_detected(entries: list[Any], how: str, pick: float) -> None:
    """Random decisions (odd text included), one random tampering: verify fails at the tampered entry."""
    n = len(entries)
    low, high = {"insert": (0, n), "swap": (1, n - 1)}.get(how, (1, n))
    k = low + int(pick * (high - low + 1))

    async def scenario() -> audit_store.VerifyReport:
        with tempfile.TemporaryDirectory() as tmp:
            eng = create_async_engine(f"sqlite+aiosqlite:///{tmp}/a.db")
            log = AuditLog(eng, Path(tmp), flush_interval=60)
            await log.start()
            for i, (principal, groups, allowed, reason) in enumerate(entries):
                log.decide(decision(i, principal=principal, groups=tuple(groups), allowed=allowed, reason=reason))
            await log.close()
            assert (await log.verify()).ok
            await tamper(eng, how, k)
            report = await log.verify()
            await eng.dispose()
            return report

    report = asyncio.run(scenario())
    assert not report.ok
    assert report.broken_at == _expected(how, k), report


TEXT_OR_NONE = st.one_of(st.none(), st.text(max_size=30))


def stored(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """audit_entries rows (column order) as entries, the way the store reads them back."""
    out = []
    for row in rows:
        entry = dict(zip([c.name for c in entries_table.c if c.name != "seal"], row, strict=True))  # unsealed
        entry["groups"] = json.loads(entry.pop("groups_json"))
        if entry["coverage"] is None:
            del entry["coverage"]
        out.append(entry)
    return out


@settings(max_examples=300, deadline=None)
@given(
    request_id=st.text(max_size=40), principal=st.text(max_size=40), groups=st.lists(st.text(max_size=12), max_size=4),
    operation=st.text(max_size=20), memory_id=TEXT_OR_NONE, privilege=TEXT_OR_NONE, allowed=st.booleans(),
    reason=st.text(max_size=300), at=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)  # fmt: skip
def test_journal_lines_read_back_as_decided(
    request_id: str, principal: str, groups: list[str], operation: str, memory_id: str | None,
    privilege: str | None, allowed: bool, reason: str, at: datetime,
) -> None:  # fmt: skip
    """Any decision, through either journal line format, reads back with the same fields (NUL aside)."""
    entry = DecisionEntry(request_id, principal, tuple(groups), operation, memory_id, privilege, allowed, reason,
                          at.replace(tzinfo=UTC))  # fmt: skip
    item = dict(zip(audit_store.ITEM, audit_lines.item(audit_lines.line(entry)[:-1]), strict=True))

    def same(x: str | None) -> str | None:
        return x.replace("\x00", "\ufffd") if x else None if x is None or x == "" else x

    assert item["request_id"] == request_id.replace("\x00", "\ufffd")
    assert item["principal"] == principal.replace("\x00", "\ufffd")
    assert item["groups"] == [g.replace("\x00", "\ufffd") for g in groups]
    assert item["operation"] == operation.replace("\x00", "\ufffd")
    assert (item["memory_id"], item["privilege"]) == (same(memory_id), same(privilege))
    assert item["decision"] == ("allow" if allowed else "deny")
    assert item["reason"] == reason.replace("\x00", "\ufffd")
    assert item["at"] == stamp(entry.at)
    [row] = stored(audit_store.chain(audit_store.Head(), [tuple(item.values())]))
    assert audit_chain._body(row) == audit_store.canonical_json({k: row[k] for k in FIELDS if k != "hash"})
    assert audit_store.chain_hash(row) == row["hash"]  # the flusher's inlined form is the verifier's


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=40), data=st.data())
def test_any_single_tampering_of_an_export_is_detected(n: int, data: st.DataObject) -> None:
    """On an exported chain: changing, dropping, duplicating or swapping lines is caught where it happens."""
    items = [(stamp(BASE), f"r{i}", "member:a", ["group:g"], "read", None, "read", "allow", str(i))
             for i in range(n)]  # fmt: skip
    rows = stored(audit_store.chain(audit_store.Head(), items))
    lines = [audit_store.canonical_json(r) for r in rows]
    assert audit_store.verify_lines(lines).ok
    how = data.draw(st.sampled_from(["edit", "drop", "duplicate", "swap"] if n > 1 else ["edit", "duplicate"]))
    k = data.draw(st.integers(min_value=0, max_value=n - (2 if how == "swap" else 1)))
    if how == "edit":
        lines[k] = audit_store.canonical_json({**rows[k], "reason": rows[k]["reason"] + "!"})
    elif how == "drop":
        del lines[k]
    elif how == "duplicate":
        lines.insert(k, lines[k])
    else:
        lines[k], lines[k + 1] = lines[k + 1], lines[k]
    report = audit_store.verify_lines(lines)
    if how == "drop" and k == n - 1:
        assert report.ok  # an export has no head record: a cut end shows only against the database
        return
    assert not report.ok
    assert report.broken_at == k + (2 if how == "duplicate" else 1), report
