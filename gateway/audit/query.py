"""Reading the decision log: filters, pages of decisions, and the stored chain for export.

A reader sees decisions, one per memory decided on: an entry holding a coverage set (a recall's plan) is
read as its decisions, each carrying the entry's seq, time, request and principal, and its own `part`
(1, 2, ... in the set; 0 for an entry that is a single decision). Filters apply to each decision, so
"every decision about memory M" finds the recalls that covered M. An export is the chain as stored,
each coverage set beside the entry naming it, so it can be verified without the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters import cursors
from gateway.audit.chain import COVERED, FIELDS
from gateway.audit.store import coverage_items_table, decode_covers, entries_table, link, load_coverage
from gateway.base.clock import rfc3339

DECISIONS = ("allow", "deny")
ENTRY = (*FIELDS, "client_request_id", "part", "coverage")  # a decision as a reader gets it
MAX_PAGE = 1000


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

    def matches(self, decision: dict[str, Any]) -> bool:
        """The per-decision filters, for the decisions of a coverage set (SQL has chosen the entries)."""
        memory = decision["memory_id"]
        return ((self.memory_id is None or memory == self.memory_id)
                and (self.memory_ids is None or memory in self.memory_ids)
                and (self.operation is None or decision["operation"] == self.operation)
                and (self.decision is None or decision["decision"] == self.decision))  # fmt: skip


InvalidCursor = cursors.InvalidCursor  # a cursor this log did not hand out (or one for the other order)


def stamp(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds, the form `at` is stored and compared in."""
    return rfc3339(at)


def _listing(newest_first: bool) -> str:
    # Each order is its own listing: a position is "after" in one and "before" in the other.
    return "audit.newest" if newest_first else "audit.oldest"


def _cursor(seq: int, part: int, newest_first: bool) -> str:
    return cursors.encode(_listing(newest_first), (seq, part))


def _position(cursor: str, newest_first: bool) -> tuple[int, int]:
    seq, part = cursors.decode(_listing(newest_first), cursor, (int, int))
    if seq < 0 or part < 0:
        raise InvalidCursor("invalid cursor")
    return int(seq), int(part)


def _conditions(f: AuditQuery) -> list[sa.ColumnElement[bool]]:
    """Entries that are, or hold, a decision matching `f`."""
    c, i = entries_table.c, coverage_items_table.c
    out: list[sa.ColumnElement[bool]] = [c.principal == f.principal] if f.principal is not None else []
    if f.since is not None:
        out.append(c.at >= stamp(f.since))
    if f.until is not None:
        out.append(c.at < stamp(f.until))
    own: list[sa.ColumnElement[bool]] = []
    held: list[sa.ColumnElement[bool]] = []
    for column in ("memory_id", "operation", "decision"):
        if (value := getattr(f, column)) is not None:
            own.append(c[column] == value)
            held.append(i[column] == value)
    if f.memory_ids is not None:
        scope = sorted(f.memory_ids)
        own.append(c.memory_id.in_(scope) if scope else sa.false())
        held.append(i.memory_id.in_(scope) if scope else sa.false())
    if own:
        planned = c.coverage.in_(sa.select(i.digest).where(*held).distinct())
        out.append(sa.or_(sa.and_(c.coverage.is_(None), *own), planned))
    return out


def decisions(entry: dict[str, Any], covers: Any) -> list[dict[str, Any]]:
    """An entry as the decisions it records: itself (part 0), or one per decision of its coverage set."""
    own = {k: entry[k] for k in FIELDS}
    own["client_request_id"] = entry.get("client_request_id")
    if "coverage" not in entry:
        return [{**own, "part": 0, "coverage": None}]
    if not isinstance(covers, list):  # missing or tampered: verify says so; the reader sees the entry itself
        return [{**own, "part": 0, "coverage": entry["coverage"]}]
    out = []
    for part, decided in enumerate(covers, start=1):
        one = dict(own)
        one.update(zip(COVERED, decided, strict=False))
        one["part"], one["coverage"] = part, entry["coverage"]
        out.append(one)
    return out


def _window(base: Any, boundary: int | None, inclusive: bool, newest: bool) -> Any:
    """The next batch of `base` past `boundary` in reading order (from it, when `inclusive`)."""
    seq = entries_table.c.seq
    if boundary is None:
        return base
    if newest:
        return base.where(seq <= boundary if inclusive else seq < boundary)
    return base.where(seq >= boundary if inclusive else seq > boundary)


async def _decode_missing(conn: Any, entries: list[dict[str, Any]], bodies: MutableMapping[str, Any]) -> None:
    """Load into `bodies` the coverage sets `entries` name that are not decoded yet."""
    missing = {e["coverage"] for e in entries if "coverage" in e and e["coverage"] not in bodies}
    if missing:
        stored = await load_coverage(conn, missing)
        bodies.update({d: decode_covers(stored.get(d)) for d in missing})


def _handed_out(one: dict[str, Any], position: tuple[int, int] | None, newest: bool) -> bool:
    """Whether the page before (ending at `position`) already held this decision."""
    if position is None or one["seq"] != position[0]:
        return False
    return bool(one["part"] >= position[1] if newest else one["part"] <= position[1])


def _matching(entries: list[dict[str, Any]], bodies: Mapping[str, Any], filters: AuditQuery,
              position: tuple[int, int] | None) -> Iterator[dict[str, Any]]:  # fmt: skip
    """The decisions of `entries` that match `filters` and were not handed out already, in reading order."""
    newest = filters.newest_first
    for entry in entries:
        parts = decisions(entry, bodies.get(entry["coverage"]) if "coverage" in entry else None)
        for one in reversed(parts) if newest else parts:
            if (one["part"] and not filters.matches(one)) or _handed_out(one, position, newest):
                continue
            yield one


async def query(engine: AsyncEngine, filters: AuditQuery, cursor: str | None = None, limit: int = 100,
                bodies: MutableMapping[str, Any] | None = None) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
    """One page of decisions matching `filters`, and the cursor for the next page (None: no more).

    `bodies` caches decoded coverage sets across calls (they never change under their digest). Entries are
    read in batches of `limit + 1` until the page is full, because one entry may hold many decisions and a
    filter may keep few of them."""
    limit = max(1, min(int(limit), MAX_PAGE))
    bodies = {} if bodies is None else bodies
    newest = filters.newest_first
    seq = entries_table.c.seq
    position = _position(cursor, newest) if cursor is not None else None
    base = sa.select(entries_table).where(*_conditions(filters)).order_by(seq.desc() if newest else seq.asc())
    found: list[dict[str, Any]] = []
    boundary, inclusive = (position[0], position[1] > 0) if position else (None, False)
    async with engine.connect() as conn:
        while len(found) <= limit:
            stmt = _window(base, boundary, inclusive, newest).limit(limit + 1)
            entries = [link(row) for row in (await conn.execute(stmt)).all()]
            await _decode_missing(conn, entries, bodies)
            found.extend(_matching(entries, bodies, filters, position))
            if len(entries) <= limit:
                break
            boundary, inclusive = entries[-1]["seq"], False
    page = found[:limit]
    more = len(found) > limit
    return page, _cursor(page[-1]["seq"], page[-1]["part"], newest) if more else None


async def iter_links(engine: AsyncEngine, filters: AuditQuery | None = None,
                     page: int = 1000) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
    """Every stored entry that is or holds a decision matching `filters`, in seq order, each coverage set
    beside the entry naming it (`covers`): the chain as verify_lines checks it."""
    conditions = _conditions(filters) if filters is not None else []
    seq, after = entries_table.c.seq, 0
    while True:
        stmt = sa.select(entries_table).where(seq > after, *conditions).order_by(seq).limit(page)
        async with engine.connect() as conn:
            entries = [link(row) for row in (await conn.execute(stmt)).all()]
            needed = {e["coverage"] for e in entries if "coverage" in e}
            stored = await load_coverage(conn, needed) if needed else {}
        for entry in entries:
            if "coverage" in entry:
                entry["covers"] = decode_covers(stored.get(entry["coverage"]))
            yield entry
        if len(entries) < page:
            return
        after = entries[-1]["seq"]
