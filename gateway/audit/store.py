"""Where the decision log lives: its tables, appending a chained batch, and checking the stored chain.

`audit_entries` holds the chain (see gateway.audit.chain). `audit_coverage` holds each coverage set once,
under its digest, and `audit_coverage_items` one row per decision in it, so a question about one memory
finds the recalls that decided on it. `audit_head` holds the last entry's seq and hash, updated in the
same transaction as every batch: it shows entries cut off the end, which the chain alone cannot.
`audit_genesis` holds, sealed, the entry from which the log is sealed (gateway.audit.seal).
`audit_journals` holds how far each journal has been committed (see gateway.audit). SQLAlchemy Core
throughout: SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.audit.chain import (
    FIELDS,
    GENESIS,
    ITEM,
    UNKNOWN,
    ChainChecker,
    Genesis,
    Head,
    VerifyReport,
    canonical_json,
    chain,
    chain_hash,
    verify_lines,
)  # fmt: skip
from gateway.audit.seal import Seal

__all__ = ["FIELDS", "GENESIS", "ITEM", "Genesis", "Head", "HeadMoved", "VerifyReport", "canonical_json", "chain",
           "chain_hash", "verify_lines"]  # fmt: skip

metadata = sa.MetaData()
_seq_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # INTEGER PRIMARY KEY is SQLite's rowid

entries_table = sa.Table(
    "audit_entries",
    metadata,
    sa.Column("seq", _seq_type, primary_key=True, autoincrement=False),
    sa.Column("at", sa.String(24), nullable=False),  # RFC 3339 UTC with ms: sorts as it reads
    sa.Column("request_id", sa.Text, nullable=False),
    sa.Column("principal", sa.Text, nullable=False),
    sa.Column("groups_json", sa.Text, nullable=False),
    sa.Column("operation", sa.Text, nullable=False),
    sa.Column("memory_id", sa.Text, nullable=True),
    sa.Column("privilege", sa.Text, nullable=True),
    sa.Column("decision", sa.String(5), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("coverage", sa.String(64), nullable=True),  # the digest of the decisions a recall's plan made
    sa.Column("client_request_id", sa.Text, nullable=True),  # the x-request-id a client sent, if any
    sa.Column("seal", sa.String(64), nullable=True),  # HMAC of `hash` where the log is sealed (audit_seal)
    sa.Index("ix_audit_entries_principal_seq", "principal", "seq"),
    sa.Index("ix_audit_entries_memory_seq", "memory_id", "seq"),
    sa.Index("ix_audit_entries_at", "at"),
    sa.Index("ix_audit_entries_coverage_seq", "coverage", "seq"),
)
coverage_table = sa.Table(
    "audit_coverage", metadata, sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
)  # fmt: skip
coverage_items_table = sa.Table(  # an index of audit_coverage for filtering; verify checks it matches
    "audit_coverage_items", metadata,
    sa.Column("digest", sa.String(64), primary_key=True), sa.Column("part", sa.Integer, primary_key=True),
    sa.Column("memory_id", sa.Text, nullable=True), sa.Column("operation", sa.Text, nullable=False),
    sa.Column("decision", sa.String(5), nullable=False),
    sa.Index("ix_audit_coverage_items_memory", "memory_id", "digest"),
    sa.Index("ix_audit_coverage_items_operation", "operation", "decision", "digest"),
)  # fmt: skip
head_table = sa.Table(  # one row, id 1
    "audit_head", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False), sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("seal", sa.String(64), nullable=True),
)  # fmt: skip
genesis_table = sa.Table(  # one row, id 1, once the log is sealed: entry `seq` (hash `hash`) on are sealed
    "audit_genesis", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False), sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("seal", sa.String(64), nullable=True),
)  # fmt: skip
journals_table = sa.Table(
    "audit_journals", metadata, sa.Column("journal_id", sa.String(64), primary_key=True),
    sa.Column("segment", sa.BigInteger, nullable=False), sa.Column("byte_offset", sa.BigInteger, nullable=False),
)  # fmt: skip


class HeadMoved(Exception):
    """Another writer moved the chain's head since it was read: re-read it and chain again."""


async def create_audit_tables(engine: AsyncEngine) -> None:
    """Create the decision log's tables where missing; an older log gains the columns added since."""
    async with engine.begin() as conn:
        await create_audit_tables_on(conn)


async def create_audit_tables_on(conn: AsyncConnection) -> None:
    """The same inside a transaction of the caller's (a starting gateway's, under its startup lock)."""
    await conn.run_sync(metadata.create_all)
    await conn.run_sync(_add_columns)


_ADDED = ((entries_table, "coverage", "ix_audit_entries_coverage_seq", "VARCHAR(64)"),
          (entries_table, "seal", None, "VARCHAR(64)"), (head_table, "seal", None, "VARCHAR(64)"),
          (entries_table, "client_request_id", None, "TEXT"))  # fmt: skip


def _add_columns(conn: sa.Connection) -> None:
    quote = conn.dialect.identifier_preparer
    for table, column, index, kind in _ADDED:
        schema = conn.schema_for_object(table)
        if column in {c["name"] for c in sa.inspect(conn).get_columns(table.name, schema=schema)}:
            continue
        name = (f"{quote.quote_schema(schema)}." if schema else "") + quote.quote(table.name)
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {quote.quote(column)} {kind}")
        if index is not None:
            next(i for i in table.indexes if i.name == index).create(conn)


def coverage_rows(digest: str, body: str) -> list[dict[str, Any]]:
    """audit_coverage_items rows of one coverage set (parts numbered from 1)."""
    return [{"digest": digest, "part": n, "memory_id": d[1], "operation": d[0], "decision": d[3]}
            for n, d in enumerate(json.loads(body), start=1)]


async def _store_coverage(conn: AsyncConnection, sets: Mapping[str, str]) -> None:
    """Insert the coverage sets not stored yet (the journal repeats a set after every restart)."""
    c = coverage_table.c
    found = set((await conn.execute(sa.select(c.digest).where(c.digest.in_(sorted(sets))))).scalars())
    new = {d: body for d, body in sets.items() if d not in found}
    if new:
        await conn.execute(sa.insert(coverage_table), [{"digest": d, "body": b} for d, b in new.items()])
        await conn.execute(sa.insert(coverage_items_table),
                           [row for d, b in new.items() for row in coverage_rows(d, b)])


def _insert_sql(conn: AsyncConnection) -> str | None:
    """A plain INSERT for the driver's executemany (SQLAlchemy's per-row work is the flusher's biggest cost)."""
    mark = {"qmark": "?", "format": "%s", "numeric_dollar": "$"}.get(conn.dialect.paramstyle)
    if conn.sync_connection is None or mark is None:
        return None
    quote, schema = conn.dialect.identifier_preparer, conn.sync_connection.schema_for_object(entries_table)
    name = (f"{quote.quote_schema(schema)}." if schema else "") + quote.quote(entries_table.name)
    marks = ",".join(f"${i}" if mark == "$" else mark for i in range(1, len(entries_table.c) + 1))
    columns = ",".join(quote.quote(c.name) for c in entries_table.c)
    return f"INSERT INTO {name} ({columns}) VALUES ({marks})"  # noqa: S608 - our own names, quoted


def link(row: Any) -> dict[str, Any]:
    """An audit_entries row as the chain hashes it: FIELDS, and `coverage` where the entry names a set."""
    m = row._mapping
    try:
        groups: Any = json.loads(m["groups_json"])
    except ValueError:
        groups = m["groups_json"]  # tampered: still hashed as found, so verify reports it
    out = {k: (groups if k == "groups" else m[k]) for k in FIELDS}
    if m["coverage"] is not None:
        out["coverage"] = m["coverage"]
    if m["client_request_id"] is not None:
        out["client_request_id"] = m["client_request_id"]
    if m["seal"] is not None:
        out["seal"] = m["seal"]  # not hashed: checked with the key (gateway.audit.seal)
    return out


def decode_covers(body: str | None) -> Any:
    """A stored coverage set's decisions (None: missing; a tampered body that is not JSON comes back as
    found, so the digest check reports it)."""
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body


async def load_coverage(conn: AsyncConnection, digests: set[str]) -> dict[str, str]:
    """Stored bodies of the given coverage sets (those missing are left out)."""
    c = coverage_table.c
    found: dict[str, str] = {}
    for chunk in (sorted(digests)[i : i + 500] for i in range(0, len(digests), 500)):
        found.update((d, b) for d, b in await conn.execute(sa.select(c.digest, c.body).where(c.digest.in_(chunk))))
    return found


async def load_state(engine: AsyncEngine, journal_id: str) -> tuple[Head, tuple[int, int] | None]:
    """The chain's head and how far journal `journal_id` has been committed (None: not at all)."""
    async with engine.connect() as conn:
        found = (await conn.execute(sa.select(head_table.c.seq, head_table.c.hash, head_table.c.seal))).first()
        if found is not None:
            head = Head(int(found.seq), str(found.hash), True, found.seal)
        else:
            e = entries_table.c
            last = (await conn.execute(sa.select(e.seq, e.hash).order_by(e.seq.desc()).limit(1))).first()
            head = Head(int(last.seq), str(last.hash), False) if last is not None else Head()
        j = journals_table.c
        pos = (await conn.execute(sa.select(j.segment, j.byte_offset).where(j.journal_id == journal_id))).first()
    return head, (int(pos.segment), int(pos.byte_offset)) if pos is not None else None


async def load_genesis(conn: AsyncConnection) -> Genesis | None:
    """The record that sealing began (None: the log was never sealed, or the record was removed)."""
    g = genesis_table.c
    found = (await conn.execute(sa.select(g.seq, g.hash, g.seal).where(g.id == 1))).first()
    return Genesis(int(found.seq), str(found.hash), found.seal) if found is not None else None


async def load_head(conn: AsyncConnection) -> Head | None:
    """The audit_head row (None: there is none)."""
    h = head_table.c
    found = (await conn.execute(sa.select(h.seq, h.hash, h.seal).where(h.id == 1))).first()
    return Head(int(found.seq), str(found.hash), True, found.seal) if found is not None else None


async def hash_at(conn: AsyncConnection, seq: int) -> str | None:
    """The stored hash of entry `seq` (None: no such entry)."""
    e = entries_table.c
    return (await conn.execute(sa.select(e.hash).where(e.seq == seq))).scalar()


async def seal_traces(conn: AsyncConnection) -> tuple[int | None, int]:
    """(the first entry carrying a seal, or None; how many entries there are): what a log without a
    genesis record still shows of having been sealed."""
    e = entries_table.c
    first = (await conn.execute(sa.select(sa.func.min(e.seq)).where(e.seal.is_not(None)))).scalar()
    count = (await conn.execute(sa.select(sa.func.count()).select_from(entries_table))).scalar()
    return (int(first) if first is not None else None), int(count or 0)


async def _chain_in_slices(head: Head, items: list[tuple[Any, ...]], size: int = 250) -> list[tuple[Any, ...]]:
    """chain(), a slice at a time with the event loop let through in between: a second's worth of
    decisions is milliseconds of hashing, which requests should not wait behind."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        rows.extend(chain(Head(rows[-1][0], rows[-1][11]) if rows else head, items[start : start + size]))
    return rows


async def append_batch(engine: AsyncEngine, head: Head, items: list[tuple[Any, ...]], journal_id: str | None,
                       segment: int, offset: int, sets: Mapping[str, str] | None = None,
                       seal: Seal | None = None, genesis: tuple[int, str] | bool = False) -> Head:  # fmt: skip
    """Chain `items` after `head`, insert them with the coverage sets they name (`sets`: digest -> body)
    and record the journal position (unless `journal_id` is None), in one transaction.

    `genesis` (with `seal`) records that sealing begins: at the first of `items` (True), or at an earlier
    entry given as (seq, hash), for a log sealed before the record existed."""
    rows = [(*r, seal.entry(r[11]) if seal else None) for r in await _chain_in_slices(head, items)]
    new = Head(rows[-1][0], rows[-1][11], True, seal.head(rows[-1][0], rows[-1][11]) if seal else None) \
        if rows else head
    h, j = head_table.c, journals_table.c
    try:
        async with engine.begin() as conn:
            if rows and head.stored:
                where = (h.id == 1, h.seq == head.seq, h.hash == head.hash)
                moved = await conn.execute(sa.update(head_table).where(*where)
                                           .values(seq=new.seq, hash=new.hash, seal=new.seal))
                if moved.rowcount != 1:
                    raise HeadMoved
            elif rows:
                await conn.execute(sa.insert(head_table).values(id=1, seq=new.seq, hash=new.hash, seal=new.seal))
            if genesis and seal is not None and rows:
                since = genesis if isinstance(genesis, tuple) else (rows[0][0], rows[0][11])
                await conn.execute(sa.insert(genesis_table).values(id=1, seq=since[0], hash=since[1],
                                                                   seal=seal.genesis(*since)))
            if sets:
                await _store_coverage(conn, sets)
            if rows and (sql := _insert_sql(conn)) is not None:
                await conn.exec_driver_sql(sql, rows)
            elif rows:
                names = [c.name for c in entries_table.c]
                await conn.execute(sa.insert(entries_table), [dict(zip(names, r, strict=True)) for r in rows])
            if journal_id is not None:
                at = {"segment": segment, "byte_offset": offset}
                done = await conn.execute(sa.update(journals_table).where(j.journal_id == journal_id).values(at))
                if done.rowcount != 1:
                    await conn.execute(sa.insert(journals_table).values(journal_id=journal_id, **at))
    except IntegrityError as exc:  # a concurrent writer took the same seq or created the head first
        raise HeadMoved from exc
    return new


async def verify(engine: AsyncEngine, anchor: Head | None = None, page: int = 2000,
                 seal: Seal | None = None, anchor_name: str = "this gateway") -> VerifyReport:  # fmt: skip
    """Check the whole chain in seq order, each coverage set an entry names, then the chain's end against
    audit_head (and `anchor`, if given); with the seal, against the record that sealing began too."""
    e, h = entries_table.c, head_table.c
    after, retried = 0, False
    indexed: set[str] = set()  # coverage sets whose items were checked against their body
    async with engine.connect() as conn:
        genesis = await load_genesis(conn) if seal is not None else UNKNOWN
        checker = ChainChecker(anchor, seal=seal, genesis=genesis, anchor_name=anchor_name)
        if checker.problem is not None:
            return VerifyReport(False, 0, checker.broken_at, checker.problem)
        while True:
            stmt = sa.select(entries_table).where(e.seq > after).order_by(e.seq).limit(page)
            entries = [link(row) for row in (await conn.execute(stmt)).all()]
            needed = {x["coverage"] for x in entries if "coverage" in x}
            bodies = await load_coverage(conn, needed) if needed else {}
            for entry in entries:
                if "coverage" in entry:
                    entry["covers"] = decode_covers(bodies.get(entry["coverage"]))
                if not checker.feed(entry):
                    return VerifyReport(False, checker.checked, checker.broken_at, checker.problem)
                digest = entry.get("coverage")
                if digest is not None and digest not in indexed:
                    if problem := await _index_problem(conn, digest, bodies[digest]):
                        return VerifyReport(False, entry["seq"] - 1, entry["seq"], f"entry {entry['seq']}: {problem}")
                    indexed.add(digest)
                after = entry["seq"]
            if entries:
                retried = False
                continue
            found = (await conn.execute(sa.select(h.seq, h.hash, h.seal).where(h.id == 1))).first()
            head = Head(int(found.seq), str(found.hash), True, found.seal) if found is not None else None
            if head is not None and head.seq > after and not retried:
                retried = True  # a batch may have committed after the last page: look once more
                continue
            return checker.finish(head)


async def _index_problem(conn: AsyncConnection, digest: str, body: str) -> str | None:
    """Whether audit_coverage_items still says what the set says: a doctored index would hide a recall
    from a question about one memory, so it is checked like the chain."""
    i = coverage_items_table.c
    stmt = sa.select(i.digest, i.part, i.memory_id, i.operation, i.decision).where(i.digest == digest)
    found = sorted((dict(r._mapping) for r in await conn.execute(stmt)), key=lambda r: r["part"])
    if found != coverage_rows(digest, body):
        return f"the index of its coverage set {digest} does not match the set"
    return None
