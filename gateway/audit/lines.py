"""The decision log's journal lines: what a decision is, and how it is written to and read back from the
journal (see gateway.audit).

A decision is one line of fields joined by US (0x1f); what would not split back exactly goes as a JSON
array. An entry holding a recall's coverage set carries the set's digest as a tenth field, and the set
itself travels once per process on a line of its own: `C<digest>` US `<canonical JSON>`. A client's own
request id, when it sent one, is an eleventh field (the tenth then empty when there is no set). Lines
are authenticated when written to the journal (gateway.audit.journal); these are the lines inside that.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.audit.chain import canonical_json, coverage_digest
from gateway.audit.query import stamp
from gateway.base.clock import now, rfc3339_us

ID_CAP, REASON_CAP, GROUPS_CAP = 256, 2048, 1000  # longer values are cut, marked with "…"
SET_ITEMS, SET_BYTES = 1000, 256 * 1024  # a coverage set's size: its journal line stays well inside a chunk
MAX_LINE = 512 * 1024  # a journal line (the reader takes the journal a megabyte at a time)


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One access decision: who, doing what, on which memory, needing which privilege, allowed or not, why.

    Deliberately nothing else: the log stores exactly these fields (with seq and the chain hashes), never
    record content; slots forbid extra attributes and long strings are cut when stored.
    """

    request_id: str
    principal: str
    groups: tuple[str, ...]
    operation: str
    memory_id: str | None
    privilege: str | None
    allowed: bool
    reason: str
    at: datetime = field(default_factory=now)
    client_request_id: str | None = None  # the x-request-id a client sent, kept beside the gateway's own


@dataclass(frozen=True, slots=True)
class Coverage:
    """Decisions a recall's plan made, one per memory, as one coverage set (see gateway.audit.chain):
    `body` is the canonical JSON list of [operation, memory_id, privilege, decision, reason]."""

    digest: str
    body: str
    count: int

    @classmethod
    def of(cls, decided: Sequence[tuple[str, str | None, str | None, bool, str]]) -> list[Coverage]:
        """`(operation, memory, privilege, allowed, reason)` decisions as sets of bounded size, in order."""
        sets: list[Coverage] = []
        items: list[list[Any]] = []
        size = 0
        for operation, memory_id, privilege, allowed, reason in decided:
            item = [_cut(operation, ID_CAP), _cut(memory_id, ID_CAP) if memory_id else None,
                    _cut(privilege, ID_CAP) if privilege else None, "allow" if allowed else "deny",
                    _cut(reason, REASON_CAP)]  # fmt: skip
            items.append(item)
            size += sum(len(v) for v in item if v) + 16
            if len(items) >= SET_ITEMS or size >= SET_BYTES:
                sets.append(cls._made(items))
                items, size = [], 0
        if items:
            sets.append(cls._made(items))
        return sets

    @classmethod
    def _made(cls, items: list[list[Any]]) -> Coverage:
        body = canonical_json(items)
        return cls(coverage_digest(body), body, len(items))


def line(e: DecisionEntry, coverage: str | None = None) -> bytes:
    """The journal line, built on every request's path: fields joined by US (0x1f), groups by RS (0x1e),
    and the digest of the coverage set the entry holds, if any, as a tenth field.

    What would not split back exactly (a separator or newline in a value, a group "") goes as JSON instead.
    An empty memory_id or privilege is stored as None, whichever the format."""
    g, client = e.groups, e.client_request_id
    line = "\x1f".join((str(round(e.at.timestamp() * 1_000_000)), e.request_id, e.principal, "\x1e".join(g),
                        e.operation, e.memory_id or "", e.privilege or "", "1" if e.allowed else "0", e.reason))
    if (line.count("\x1f") != 8 or line.count("\x1e") != max(len(g) - 1, 0) or "\n" in line or "" in g
            or (client is not None and (not client or "\x1f" in client or "\n" in client))):
        return _line_json(e, coverage=coverage)
    if client is not None:
        return (line + "\x1f" + (coverage or "") + "\x1f" + client + "\n").encode()
    return (line + ("\x1f" + coverage if coverage else "") + "\n").encode()


def encoded(entry: DecisionEntry, coverage: str | None = None) -> bytes:
    try:
        one = line(entry, coverage)
    except Exception:  # odd types, lone surrogates
        one = _line_json(entry, coverage=coverage)
    if len(one) > MAX_LINE:
        one = _line_json(entry, cap=True, coverage=coverage)
    return one


def coverage_line(coverage: Coverage) -> bytes:
    """A coverage set's journal line, written once per process before the first entry naming it."""
    return f"C{coverage.digest}\x1f{coverage.body}\n".encode("utf-8", "surrogatepass")


def _line_json(e: Any, cap: bool = False, coverage: str | None = None) -> bytes:
    """The JSON-array line, for what _line cannot carry: coerces odd types; never raises."""

    def text(v: Any, limit: int = ID_CAP) -> str | None:
        v = v if v is None or isinstance(v, str) else repr(v)
        return _cut(v, limit) if cap and v is not None else v

    try:
        row: list[Any] = [round(e.at.timestamp() * 1_000_000), text(e.request_id), text(e.principal),
                          [text(g) for g in list(e.groups or ())[:GROUPS_CAP]], text(e.operation), text(e.memory_id),
                          text(e.privilege), 1 if e.allowed is True else 0, text(e.reason, REASON_CAP)]  # fmt: skip
        client = getattr(e, "client_request_id", None)
        client = text(client) if client is not None else None
    except Exception as exc:
        at = round(now().timestamp() * 1_000_000)
        row = [at, "", "", [], "audit.unencodable", None, None, 0, f"unencodable decision: {exc!r}"]
        client = None
    if coverage or client is not None:
        row.append(coverage or None)
    if client is not None:
        row.append(client)
    return (json.dumps(row) + "\n").encode()


def _cut(value: Any, cap: int) -> str:
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    if len(s) > cap:
        s = s[: cap - 1] + "…"
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL
    return s if s.isascii() else s.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates


def item(raw: bytes) -> tuple[Any, ...]:
    """A journal line (without its newline) -> the entry's stored fields, in ITEM order. Raises on a bad line."""
    if raw[:1] != b"[":
        us, request_id, principal, names, operation, memory_id, privilege, allowed, reason, *more = (
            raw.decode().split("\x1f"))
        coverage = _optional(more)
        groups = names.split("\x1e") if names else []
        if (b"\x00" not in raw and len(reason) <= REASON_CAP and len(groups) <= GROUPS_CAP
                and max(len(request_id), len(principal), len(operation), len(memory_id), len(privilege),
                        *map(len, groups)) <= ID_CAP):  # fmt: skip
            return (rfc3339_us(int(us)), request_id, principal, groups, operation, memory_id or None, privilege or None,
                    "allow" if allowed == "1" else "deny", reason, *coverage)
        fields: list[Any] = [int(us), request_id, principal, groups, operation, memory_id or None,
                             privilege or None, allowed == "1", reason]  # fmt: skip
    else:
        fields = json.loads(raw)
        coverage = _optional(fields[9:])
    us, request_id, principal, groups, operation, memory_id, privilege, allowed, reason = fields[:9]
    kept = [_cut(g, ID_CAP) for g in list(groups)[:GROUPS_CAP]]
    if len(groups) > GROUPS_CAP:
        kept.append(f"…{len(groups) - GROUPS_CAP} more")
    return (rfc3339_us(round(us)), _cut(request_id, ID_CAP), _cut(principal, ID_CAP), kept, _cut(operation, ID_CAP),
            _cut(memory_id, ID_CAP) if memory_id else None, _cut(privilege, ID_CAP) if privilege else None,
            "allow" if allowed else "deny", _cut(reason, REASON_CAP), *coverage)


def _optional(more: list[Any]) -> tuple[Any, ...]:
    """The optional fields: (), (the coverage set's digest,) or (the digest or None, the client's request
    id). Raises on anything else."""
    if not more:
        return ()
    if len(more) > 2:
        raise ValueError("a journal line has fields past the client's request id")
    digest = more[0] or None  # empty only when a client's request id follows
    if digest is None and len(more) == 1:
        raise ValueError("a journal line's tenth field is empty")
    if digest is not None and (not isinstance(digest, str) or len(digest) != 64):
        raise ValueError("a journal line's tenth field is not a coverage set's digest")
    if len(more) == 1:
        return (digest,)
    if not isinstance(more[1], str) or not more[1]:
        raise ValueError("a journal line's client request id is not text")
    return (digest, _cut(more[1], ID_CAP))


def marker(operation: str, reason: str) -> tuple[Any, ...]:
    """An entry the log writes about itself (operation `audit.*`), so its own trouble is on the chain."""
    return (stamp(now()), "", "memfed:audit", [], operation, None, None, "deny", reason)
