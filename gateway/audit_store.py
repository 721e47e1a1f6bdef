"""Where the decision log lives: its tables, the hash chain, verification, reading and export.

The chain. Entries are numbered 1, 2, 3, ... with no gaps, and each carries
    hash = sha256(prev_hash || canonical_json(entry without "hash"))
where `prev_hash` is the previous entry's hash as 64 lowercase hex digits (ASCII bytes), the first entry's
`prev_hash` is 64 zeros, and canonical_json is UTF-8 JSON with sorted keys and no spaces. The hashed entry
includes its own `seq` and `prev_hash`, so an edited, deleted, inserted or reordered entry breaks the chain.

`audit_head` holds the last entry's seq and hash, updated in the same transaction as every batch: it shows
entries cut off the end, which the chain alone cannot. `audit_journals` holds how far each journal has been
committed (see gateway.audit). SQLAlchemy Core throughout: SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring as _str
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

GENESIS = "0" * 64
FIELDS = ("seq", "at", "request_id", "principal", "groups", "operation", "memory_id", "privilege", "decision",
          "reason", "prev_hash", "hash")  # fmt: skip
ITEM = ("at", "request_id", "principal", "groups", "operation", "memory_id", "privilege", "decision", "reason")
DECISIONS = ("allow", "deny")
MAX_PAGE = 1000

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
    sa.Index("ix_audit_entries_principal_seq", "principal", "seq"),
    sa.Index("ix_audit_entries_memory_seq", "memory_id", "seq"),
    sa.Index("ix_audit_entries_at", "at"),
)
head_table = sa.Table(  # one row, id 1
    "audit_head", metadata, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False), sa.Column("hash", sa.String(64), nullable=False),
)  # fmt: skip
journals_table = sa.Table(
    "audit_journals", metadata, sa.Column("journal_id", sa.String(64), primary_key=True),
    sa.Column("segment", sa.BigInteger, nullable=False), sa.Column("byte_offset", sa.BigInteger, nullable=False),
)  # fmt: skip


async def create_audit_tables(engine: AsyncEngine) -> None:
    """Create the decision log's tables where missing (honours the engine's schema_translate_map)."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_BODY = ('{"at":%s,"decision":%s,"groups":[%s],"memory_id":%s,"operation":%s,"prev_hash":%s,"principal":%s,'
         '"privilege":%s,"reason":%s,"request_id":%s,"seq":%d}')  # fmt: skip


def _body(e: Mapping[str, Any]) -> str:
    """canonical_json of the entry without "hash": by hand (the flusher's hot spot), generic for odd values."""
    try:
        m, p, seq = e["memory_id"], e["privilege"], e["seq"]
        if type(seq) is not int or type(e["groups"]) is not list:
            raise TypeError
        return _BODY % (_str(e["at"]), _str(e["decision"]), ",".join(map(_str, e["groups"])),
                        "null" if m is None else _str(m), _str(e["operation"]), _str(e["prev_hash"]),
                        _str(e["principal"]), "null" if p is None else _str(p), _str(e["reason"]),
                        _str(e["request_id"]), seq)  # fmt: skip
    except (TypeError, KeyError):  # encode_basestring refuses non-strings
        return canonical_json({k: e.get(k) for k in FIELDS if k != "hash"})


def chain_hash(entry: Mapping[str, Any]) -> str:
    """The hash an entry must carry, given its fields and its `prev_hash`."""
    data = str(entry.get("prev_hash")) + _body(entry)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Head:
    """The last entry of the chain; `stored` says whether the audit_head row exists yet."""

    seq: int = 0
    hash: str = GENESIS
    stored: bool = False


class HeadMoved(Exception):
    """Another writer moved the chain's head since it was read: re-read it and chain again."""


def chain(head: Head, items: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Number and hash `items` (ITEM-ordered tuples of normalized text) after `head`: audit_entries rows, in
    column order. _body's canonical form, inlined: this is the flusher's hot loop."""
    rows: list[tuple[Any, ...]] = []
    seq, prev = head.seq, head.hash
    for at, request_id, principal, groups, operation, memory_id, privilege, decision, reason in items:
        seq += 1
        names = ",".join(map(_str, groups))
        body = _BODY % (_str(at), _str(decision), names, "null" if memory_id is None else _str(memory_id),
                        _str(operation), _str(prev), _str(principal), "null" if privilege is None else _str(privilege),
                        _str(reason), _str(request_id), seq)  # fmt: skip
        digest = hashlib.sha256((prev + body).encode("utf-8", "surrogatepass")).hexdigest()
        rows.append((seq, at, request_id, principal, f"[{names}]", operation, memory_id, privilege, decision, reason,
                     prev, digest))  # fmt: skip
        prev = digest
    return rows


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


def _entry(row: Any) -> dict[str, Any]:
    m = row._mapping
    try:
        groups: Any = json.loads(m["groups_json"])
    except ValueError:
        groups = m["groups_json"]  # tampered: still hashed as found, so verify reports it
    out = {k: m[k] for k in FIELDS if k != "groups"}
    out["groups"] = groups
    return {k: out[k] for k in FIELDS}


async def load_state(engine: AsyncEngine, journal_id: str) -> tuple[Head, tuple[int, int] | None]:
    """The chain's head and how far journal `journal_id` has been committed (None: not at all)."""
    async with engine.connect() as conn:
        found = (await conn.execute(sa.select(head_table.c.seq, head_table.c.hash))).first()
        if found is not None:
            head = Head(int(found.seq), str(found.hash), True)
        else:
            e = entries_table.c
            last = (await conn.execute(sa.select(e.seq, e.hash).order_by(e.seq.desc()).limit(1))).first()
            head = Head(int(last.seq), str(last.hash), False) if last is not None else Head()
        j = journals_table.c
        pos = (await conn.execute(sa.select(j.segment, j.byte_offset).where(j.journal_id == journal_id))).first()
    return head, (int(pos.segment), int(pos.byte_offset)) if pos is not None else None


async def append_batch(engine: AsyncEngine, head: Head, items: list[tuple[Any, ...]], journal_id: str,
                       segment: int, offset: int) -> Head:  # fmt: skip
    """Chain `items` after `head`, insert them and record the journal position, in one transaction."""
    rows = chain(head, items)
    new = Head(rows[-1][0], rows[-1][-1], True) if rows else head
    h, j = head_table.c, journals_table.c
    try:
        async with engine.begin() as conn:
            if rows and head.stored:
                where = (h.id == 1, h.seq == head.seq, h.hash == head.hash)
                moved = await conn.execute(sa.update(head_table).where(*where).values(seq=new.seq, hash=new.hash))
                if moved.rowcount != 1:
                    raise HeadMoved
            elif rows:
                await conn.execute(sa.insert(head_table).values(id=1, seq=new.seq, hash=new.hash))
            if rows and (sql := _insert_sql(conn)) is not None:
                await conn.exec_driver_sql(sql, rows)
            elif rows:
                names = [c.name for c in entries_table.c]
                await conn.execute(sa.insert(entries_table), [dict(zip(names, r, strict=True)) for r in rows])
            at = {"segment": segment, "byte_offset": offset}
            done = await conn.execute(sa.update(journals_table).where(j.journal_id == journal_id).values(at))
            if done.rowcount != 1:
                await conn.execute(sa.insert(journals_table).values(journal_id=journal_id, **at))
    except IntegrityError as exc:  # a concurrent writer took the same seq or created the head first
        raise HeadMoved from exc
    return new


@dataclass(frozen=True)
class VerifyReport:
    """`broken_at` is the first sequence number where the chain breaks; `problem` says how."""

    ok: bool
    checked: int
    broken_at: int | None = None
    problem: str | None = None


def _span(first: int, last: int) -> str:
    return f"entry {first}:" if first == last else f"entries {first}..{last}:"


class ChainChecker:
    """Feed entries in seq order; stops at the first break and says where and what it is."""

    def __init__(self, anchor: Head | None = None, remember: int = 4096) -> None:
        self.prev, self.expect, self.checked = GENESIS, 1, 0
        self.broken_at: int | None = None
        self.problem: str | None = None
        self._anchor = anchor if anchor is not None and anchor.seq > 0 else None
        self._seen: dict[str, int] = {GENESIS: 0}  # recent hashes -> seq: tells an insertion apart
        self._order: deque[str] = deque()
        self._remember = remember

    def _fail(self, at: int | None, problem: str) -> bool:
        self.broken_at, self.problem = at, problem
        self.checked = min(self.checked, at - 1) if at is not None else self.checked  # intact before the break
        return False

    def feed(self, entry: Mapping[str, Any]) -> bool:
        seq, prev, expect = entry.get("seq"), entry.get("prev_hash"), self.expect
        if not isinstance(seq, int) or seq < expect:
            return self._fail(expect, f"entry {seq!r} is repeated or out of order where entry {expect} belongs")
        if seq > expect:
            return self._fail(expect, f"{_span(expect, seq - 1)} missing (deleted or moved)")
        if prev != self.prev:
            back = self._seen.get(prev) if isinstance(prev, str) else None
            if back is not None and back < seq - 1:
                note = f"{_span(back + 1, seq - 1)} inserted: entry {seq} links to entry {back}"
                return self._fail(back + 1, note)
            return self._fail(
                seq,
                f"entry {seq} does not link to entry {seq - 1}: an entry was deleted before it or entries "
                "were reordered",
            )
        if chain_hash(entry) != entry.get("hash"):
            return self._fail(seq, f"entry {seq} does not match its hash: it was edited")
        if self._anchor is not None and seq == self._anchor.seq and entry.get("hash") != self._anchor.hash:
            return self._fail(seq, f"entry {seq} is not the one this gateway wrote: the chain was rewritten")
        self.prev, self.expect, self.checked = str(entry["hash"]), expect + 1, self.checked + 1
        self._seen[self.prev] = seq
        self._order.append(self.prev)
        if len(self._order) > self._remember:
            self._seen.pop(self._order.popleft(), None)
        return True

    def finish(self, head: Head | None) -> VerifyReport:
        """Close the check against the recorded head (None: no head record) and the anchor."""
        last = self.expect - 1
        if self.problem is None and self._anchor is not None and self._anchor.seq > last:
            self._fail(last + 1, f"{_span(last + 1, self._anchor.seq)} written by this gateway missing")
        if self.problem is None and head is not None:
            if head.seq > last:
                self._fail(last + 1, f"{_span(last + 1, head.seq)} missing from the end (deleted)")
            elif head.seq < last:
                self._fail(head.seq + 1, f"{_span(head.seq + 1, last)} past the recorded head (inserted)")
            elif last and head.hash != self.prev:
                self._fail(last, f"entry {last} does not match the recorded head: it or the head was altered")
        elif self.problem is None and last > 0:
            self._fail(None, "the record of the chain's head is missing: entries cut from the end would not show")
        return VerifyReport(self.problem is None, self.checked, self.broken_at, self.problem)


async def verify(engine: AsyncEngine, anchor: Head | None = None, page: int = 2000) -> VerifyReport:
    """Check the whole chain in seq order, then its end against audit_head (and `anchor`, if given)."""
    checker = ChainChecker(anchor)
    e, h = entries_table.c, head_table.c
    after, retried = 0, False
    async with engine.connect() as conn:
        while True:
            stmt = sa.select(entries_table).where(e.seq > after).order_by(e.seq).limit(page)
            rows = (await conn.execute(stmt)).all()
            for row in rows:
                if not checker.feed(_entry(row)):
                    return VerifyReport(False, checker.checked, checker.broken_at, checker.problem)
                after = int(row.seq)
            if rows:
                retried = False
                continue
            found = (await conn.execute(sa.select(h.seq, h.hash).where(h.id == 1))).first()
            head = Head(int(found.seq), str(found.hash), True) if found is not None else None
            if head is not None and head.seq > after and not retried:
                retried = True  # a batch may have committed after the last page: look once more
                continue
            return checker.finish(head)


def verify_lines(lines: Iterable[str]) -> VerifyReport:
    """Check an NDJSON export of a whole log without the database (its end cannot be checked: no head)."""
    checker = ChainChecker()
    for line in filter(str.strip, lines):
        entry = json.loads(line)  # ValueError for a line that is not JSON
        if not isinstance(entry, dict) or not checker.feed(entry):
            return VerifyReport(False, checker.checked, checker.broken_at, checker.problem or "not an entry")
    return VerifyReport(True, checker.checked)


@dataclass(frozen=True)
class AuditQuery:
    """Filters for reading the log, all of which must hold; `since` is inclusive, `until` exclusive, naive
    datetimes are UTC. `memory_ids` scopes a reader to some memories (e.g. a subtree); empty matches nothing."""

    principal: str | None = None
    memory_id: str | None = None
    memory_ids: frozenset[str] | None = None
    operation: str | None = None
    decision: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    newest_first: bool = False

    def __post_init__(self) -> None:
        if self.decision is not None and self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, not {self.decision!r}")


class InvalidCursor(ValueError):
    """A pagination cursor this log did not hand out (or one for the other order)."""


def stamp(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds, the form `at` is stored and compared in."""
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"


def _cursor(seq: int, newest_first: bool) -> str:
    raw = f"{'d' if newest_first else 'a'}:{seq}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(cursor: str, newest_first: bool) -> int:
    try:
        kind, _, seq = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().partition(":")
        value = int(seq)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise InvalidCursor("malformed cursor") from exc
    if kind != ("d" if newest_first else "a") or value < 0:
        raise InvalidCursor("cursor does not belong to this listing order")
    return value


def _conditions(f: AuditQuery) -> list[sa.ColumnElement[bool]]:
    c = entries_table.c
    equal = ("principal", "memory_id", "operation", "decision")
    out = [c[k] == getattr(f, k) for k in equal if getattr(f, k) is not None]
    if f.memory_ids is not None:
        out.append(c.memory_id.in_(sorted(f.memory_ids)) if f.memory_ids else sa.false())
    if f.since is not None:
        out.append(c.at >= stamp(f.since))
    if f.until is not None:
        out.append(c.at < stamp(f.until))
    return out


async def query(engine: AsyncEngine, filters: AuditQuery, cursor: str | None = None,
                limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
    """One page of entries matching `filters`, and the cursor for the next page (None: no more)."""
    limit = max(1, min(int(limit), MAX_PAGE))
    seq = entries_table.c.seq
    stmt = sa.select(entries_table).where(*_conditions(filters))
    if cursor is not None:
        after = _after(cursor, filters.newest_first)
        stmt = stmt.where(seq < after if filters.newest_first else seq > after)
    stmt = stmt.order_by(seq.desc() if filters.newest_first else seq.asc()).limit(limit + 1)
    async with engine.connect() as conn:
        rows = (await conn.execute(stmt)).all()
    page = [_entry(r) for r in rows[:limit]]
    more = len(rows) > limit
    return page, _cursor(page[-1]["seq"], filters.newest_first) if more else None


async def iter_entries(engine: AsyncEngine, filters: AuditQuery | None = None,
                       page: int = 1000) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    """Every entry matching `filters`, in seq order, fetched a page at a time."""
    conditions = _conditions(filters) if filters is not None else []
    seq, after = entries_table.c.seq, 0
    while True:
        stmt = sa.select(entries_table).where(seq > after, *conditions).order_by(seq).limit(page)
        async with engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        for row in rows:
            yield _entry(row)
        if len(rows) < page:
            return
        after = int(rows[-1].seq)
