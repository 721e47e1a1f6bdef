"""The decision log's hash chain: how an entry is hashed, how a chain is built, how it is checked.

Entries are numbered 1, 2, 3, ... with no gaps, and each carries
    hash = sha256(prev_hash || canonical_json(entry without "hash"))
where `prev_hash` is the previous entry's hash as 64 lowercase hex digits (ASCII bytes), the first entry's
`prev_hash` is 64 zeros, and canonical_json is UTF-8 JSON with sorted keys and no spaces. The hashed entry
includes its own `seq` and `prev_hash`, so an edited, deleted, inserted or reordered entry breaks the chain.

A recall decides on every memory below the one asked, often a hundred or a thousand at once. Those
decisions travel as one entry holding a *coverage set*: the list of `[operation, memory_id, privilege,
decision, reason]` decisions, stored once under its SHA-256 (`coverage`, which the entry's hash covers).
The same caller asking the same question of an unchanged tree makes the same set, so it is stored once
however often it is asked, and each recall costs the log one entry, not one per memory.

An entry may carry the `client_request_id` a client sent beside the gateway's own `request_id`; like
`coverage`, it is hashed only when present, so entries from before it existed hash as they did.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _str
from typing import Any

from gateway.audit.seal import Seal

GENESIS = "0" * 64
FIELDS = ("seq", "at", "request_id", "principal", "groups", "operation", "memory_id", "privilege", "decision",
          "reason", "prev_hash", "hash")  # fmt: skip
ITEM = ("at", "request_id", "principal", "groups", "operation", "memory_id", "privilege", "decision", "reason")
COVERED = ("operation", "memory_id", "privilege", "decision", "reason")  # one decision in a coverage set
OPTIONAL = ("coverage", "client_request_id")  # hashed only when present


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def coverage_digest(body: str) -> str:
    """The name a coverage set is stored under: the SHA-256 of its canonical JSON."""
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


_BODY = ('{"at":%s,"decision":%s,"groups":[%s],"memory_id":%s,"operation":%s,"prev_hash":%s,"principal":%s,'
         '"privilege":%s,"reason":%s,"request_id":%s,"seq":%d}')  # fmt: skip


def _body(e: Mapping[str, Any]) -> str:
    """canonical_json of the entry without "hash": by hand (the flusher's hot spot), generic for odd values.
    An entry without a coverage set (or a client's request id) is hashed without the key, as before."""
    try:
        m, p, seq = e["memory_id"], e["privilege"], e["seq"]
        if (type(seq) is not int or type(e["groups"]) is not list or e.get("coverage") is not None
                or e.get("client_request_id") is not None):
            raise TypeError
        return _BODY % (_str(e["at"]), _str(e["decision"]), ",".join(map(_str, e["groups"])),
                        "null" if m is None else _str(m), _str(e["operation"]), _str(e["prev_hash"]),
                        _str(e["principal"]), "null" if p is None else _str(p), _str(e["reason"]),
                        _str(e["request_id"]), seq)  # fmt: skip
    except (TypeError, KeyError):  # encode_basestring refuses non-strings
        body = {k: e.get(k) for k in FIELDS if k != "hash"}
        for optional in OPTIONAL:
            if e.get(optional) is not None:
                body[optional] = e[optional]
        return canonical_json(body)


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
    seal: str | None = None  # the head's seal, where the log is sealed (gateway.audit.seal)


def chain(head: Head, items: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Number and hash `items` (ITEM-ordered tuples of normalized text, optionally followed by a coverage
    digest or None, then a client's request id) after `head`: audit_entries rows, in column order up to
    `client_request_id`. _body's canonical form, inlined: this is the flusher's hot loop."""
    rows: list[tuple[Any, ...]] = []
    seq, prev = head.seq, head.hash
    for item in items:
        at, request_id, principal, groups, operation, memory_id, privilege, decision, reason = item[:9]
        coverage = item[9] if len(item) > 9 else None
        client = item[10] if len(item) > 10 else None
        seq += 1
        names = ",".join(map(_str, groups))
        if coverage is None and client is None:
            body = _BODY % (_str(at), _str(decision), names, "null" if memory_id is None else _str(memory_id),
                            _str(operation), _str(prev), _str(principal),
                            "null" if privilege is None else _str(privilege), _str(reason), _str(request_id), seq)
        else:
            body = _body(dict(zip(ITEM, item[:9], strict=True), seq=seq, prev_hash=prev, coverage=coverage,
                              client_request_id=client))
        digest = hashlib.sha256((prev + body).encode("utf-8", "surrogatepass")).hexdigest()
        rows.append((seq, at, request_id, principal, f"[{names}]", operation, memory_id, privilege, decision, reason,
                     prev, digest, coverage, client))  # fmt: skip
        prev = digest
    return rows


@dataclass(frozen=True)
class Genesis:
    """The sealed record that sealing began: every entry from `seq` on carries a seal, and entry `seq` is
    the one whose hash is `hash` (gateway.audit.seal)."""

    seq: int
    hash: str
    seal: str | None


UNKNOWN: Any = object()  # no record of the genesis to go by (an export): the first sealed entry stands for it


@dataclass(frozen=True)
class VerifyReport:
    """`broken_at` is the first sequence number where the chain breaks; `problem` says how."""

    ok: bool
    checked: int
    broken_at: int | None = None
    problem: str | None = None
    sealed_from: int | None = None  # checked with the key: the entry from which every entry is sealed


def _span(first: int, last: int) -> str:
    return f"entry {first}:" if first == last else f"entries {first}..{last}:"


def covers_problem(digest: Any, covers: Any) -> str | None:
    """What is wrong with a coverage set as found beside an entry (None: it is the one the entry names)."""
    if covers is None:
        return f"its coverage set {digest} is missing"
    if coverage_digest(canonical_json(covers)) != digest:
        return f"its coverage set {digest} was edited"
    return None


class ChainChecker:
    """Feed entries in seq order; stops at the first break and says where and what it is.

    An entry naming a coverage set must arrive with the set beside it as `covers` (the decoded list);
    the set is checked against the digest the entry's hash covers."""

    def __init__(self, anchor: Head | None = None, remember: int = 4096, seal: Seal | None = None,
                 genesis: Genesis | None = UNKNOWN, anchor_name: str = "this gateway") -> None:  # fmt: skip
        self.prev, self.expect, self.checked = GENESIS, 1, 0
        self._seal, self._sealed_from = seal, 0  # with a seal: the first entry found sealed
        self._genesis = genesis
        self.broken_at: int | None = None
        self.problem: str | None = None
        self._anchor = anchor if anchor is not None and anchor.seq > 0 else None
        self._anchor_name = anchor_name
        if seal is not None and genesis is None:
            self._fail(None, "there is no record that sealing began: it was deleted with the log's seals, or this "
                             "log was never sealed (`memfed audit seal` starts sealing one that was not)")
        elif seal is not None and isinstance(genesis, Genesis) and not seal.holds(
                seal.genesis(genesis.seq, genesis.hash), genesis.seal):
            self._fail(genesis.seq, f"the record that sealing began at entry {genesis.seq} does not carry this "
                                    "log's seal: its seals were stripped or forged, or the key is not this log's")
        self._seen: dict[str, int] = {GENESIS: 0}  # recent hashes -> seq: tells an insertion apart
        self._order: deque[str] = deque()
        self._remember = remember

    def _fail(self, at: int | None, problem: str) -> bool:
        self.broken_at, self.problem = at, problem
        self.checked = min(self.checked, at - 1) if at is not None else self.checked  # intact before the break
        return False

    def feed(self, entry: Mapping[str, Any]) -> bool:
        if self.problem is not None:
            return False
        seq = entry.get("seq")
        broken = self._link_problem(seq, entry.get("prev_hash"))
        if broken is None and isinstance(seq, int):
            problem = self._content_problem(seq, entry)
            broken = (seq, problem) if problem is not None else None
        if broken is not None:
            return self._fail(*broken)
        self.prev, self.expect, self.checked = str(entry["hash"]), self.expect + 1, self.checked + 1
        self._seen[self.prev] = self.expect - 1
        self._order.append(self.prev)
        if len(self._order) > self._remember:
            self._seen.pop(self._order.popleft(), None)
        return True

    def _link_problem(self, seq: Any, prev: Any) -> tuple[int, str] | None:
        """Where and how an entry fails to follow the last one: missing, repeated, inserted or relinked."""
        expect = self.expect
        if not isinstance(seq, int) or seq < expect:
            return expect, f"entry {seq!r} is repeated or out of order where entry {expect} belongs"
        if seq > expect:
            return expect, f"{_span(expect, seq - 1)} missing (deleted or moved)"
        if prev == self.prev:
            return None
        back = self._seen.get(prev) if isinstance(prev, str) else None
        if back is not None and back < seq - 1:
            return back + 1, f"{_span(back + 1, seq - 1)} inserted: entry {seq} links to entry {back}"
        return seq, (f"entry {seq} does not link to entry {seq - 1}: an entry was deleted before it or entries "
                     "were reordered")

    def _content_problem(self, seq: int, entry: Mapping[str, Any]) -> str | None:
        """What is wrong with a well-linked entry itself: its hash, coverage set, seal, or the anchor."""
        if chain_hash(entry) != entry.get("hash"):
            return f"entry {seq} does not match its hash: it was edited"
        if entry.get("coverage") is not None and (problem := covers_problem(entry["coverage"], entry.get("covers"))):
            return f"entry {seq}: {problem}"
        if self._seal is not None and (problem := self._seal_problem(seq, entry)):
            return problem
        if self._anchor is not None and seq == self._anchor.seq and entry.get("hash") != self._anchor.hash:
            return f"entry {seq} is not the one {self._anchor_name} recorded: the chain was rewritten"
        return None

    def _seal_problem(self, seq: int, entry: Mapping[str, Any]) -> str | None:
        if self._seal is None:
            return None
        found, genesis = entry.get("seal"), self._genesis
        if isinstance(genesis, Genesis):
            if seq < genesis.seq:
                return None  # written before the log was sealed
            if seq == genesis.seq and entry.get("hash") != genesis.hash:
                return f"entry {seq} is not the entry sealing began at: the chain was rewritten from here"
            if found is None:
                return f"entry {seq} has lost its seal (entries are sealed from {genesis.seq} on)"
            if not self._seal.holds(self._seal.entry(str(entry["hash"])), found):
                return f"entry {seq} does not carry this log's seal: the chain was rewritten from here"
            self._sealed_from = genesis.seq
            return None
        if found is None:
            if self._sealed_from:
                return f"entry {seq} has lost its seal (entries are sealed from {self._sealed_from} on)"
            return None  # written before the log was sealed
        if not self._seal.holds(self._seal.entry(str(entry["hash"])), found):
            return f"entry {seq} does not carry this log's seal: the chain was rewritten from here"
        self._sealed_from = self._sealed_from or seq
        return None

    def finish(self, head: Head | None, *, headless: bool = False) -> VerifyReport:
        """Close the check against the recorded head (None: no head record; `headless`: an export, which
        has none to check) and the anchor."""
        last = self.expect - 1
        for check in (self._anchor_end_problem, self._seal_end_problem):
            if self.problem is None and (broken := check(last, head)) is not None:
                self._fail(*broken)
        if self.problem is None and (broken := self._head_problem(last, head, headless)) is not None:
            self._fail(*broken)
        sealed = self._sealed_from if self._seal is not None and self.problem is None else None
        return VerifyReport(self.problem is None, self.checked, self.broken_at, self.problem, sealed or None)

    def _anchor_end_problem(self, last: int, head: Head | None) -> tuple[int | None, str] | None:
        if self._anchor is None or self._anchor.seq <= last:
            return None
        return last + 1, (f"{_span(last + 1, self._anchor.seq)} missing, which {self._anchor_name} recorded "
                          "(the log was cut, emptied or put back to an earlier state)")

    def _seal_end_problem(self, last: int, head: Head | None) -> tuple[int | None, str] | None:
        """A sealed log must reach the entry sealing began at and keep its sealed head."""
        if self._seal is None:
            return None
        genesis = self._genesis
        if not isinstance(genesis, Genesis):
            unsealed = "no entry carries this log's seal: its seals were stripped, or it was never sealed with this key"
            return None if self._sealed_from else (None, unsealed)
        if last < genesis.seq:
            return last + 1, (f"{_span(last + 1, genesis.seq)} missing: the log ends before the entry "
                              "sealing began at (it was emptied or cut)")
        if head is None:
            return None, "the sealed record of the chain's head is missing: entries cut from the end would not show"
        return None

    def _head_problem(self, last: int, head: Head | None, headless: bool) -> tuple[int | None, str] | None:
        """The chain must end exactly at the recorded head (an export has none: only the anchor checks it)."""
        if head is None:
            if last > 0 and not headless:
                return None, "the record of the chain's head is missing: entries cut from the end would not show"
            return None
        if head.seq > last:
            return last + 1, f"{_span(last + 1, head.seq)} missing from the end (deleted)"
        if head.seq < last:
            return head.seq + 1, f"{_span(head.seq + 1, last)} past the recorded head (inserted)"
        if last and head.hash != self.prev:
            return last, f"entry {last} does not match the recorded head: it or the head was altered"
        if self._seal is not None and self._sealed_from and not self._seal.holds(
                self._seal.head(head.seq, head.hash), head.seal):
            return last, ("the recorded head does not carry this log's seal: the end of the chain was rewritten "
                          "or cut")
        return None


def verify_lines(lines: Iterable[str], seal: Seal | None = None, anchor: Head | None = None) -> VerifyReport:
    """Check an NDJSON export of a whole log without the database (its end can be checked only against an
    anchor: an export carries no head). With the key, an export in which no entry is sealed is a break."""
    checker = ChainChecker(anchor, seal=seal, anchor_name="the anchor")
    for line in filter(str.strip, lines):
        entry = json.loads(line)  # ValueError for a line that is not JSON
        if not isinstance(entry, dict) or not checker.feed(entry):
            return VerifyReport(False, checker.checked, checker.broken_at, checker.problem or "not an entry")
    return checker.finish(None, headless=True)
