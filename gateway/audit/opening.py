"""What a starting decision log checks before it writes: that the stored log is the one this gateway left.

Chaining new entries onto a rewritten log, and worse, sealing them, would lend the rewrite the gateway's
word. So a start is refused (gateway.audit.seal.AuditLogRefused, with what was found) when:
- the gateway's own note of how far the log reached (gateway.audit.journal.LocalAnchor) names an entry the
  database no longer holds, or holds with another hash: the log was cut, emptied, rewritten or put back;
- the log is sealed and no seal key is given (entries written now would break it);
- with the seal key: the record that sealing began, or the head, does not carry the log's seal, or does
  not meet the entries it names; or the log shows seals but no record that sealing began.
A log with entries, none sealed and no record that sealing began is either an unsealed log or one whose
seals were all stripped: nothing in the database tells them apart, so it is not sealed silently either;
`memfed audit seal` seals it from there on, as an operator's decision.

An empty log (or one sealed by a version before the genesis record, whose head's seal holds) is sealed at
start: the returned Opening says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.audit.chain import Genesis, Head
from gateway.audit.journal import LocalAnchor
from gateway.audit.seal import AuditLogRefused, Seal
from gateway.audit.store import hash_at, load_genesis, load_head, seal_traces

_ASIDE = ("If the database was replaced on purpose (restored from a backup), move <data_dir>/audit-journal/anchor "
          "aside and start again; `memfed audit verify` says what it holds.")  # fmt: skip
_NOTHING = "Nothing is written on top of it; `memfed audit verify` (with --anchor) says where it breaks."


@dataclass(frozen=True)
class Opening:
    """What the log does before serving: `begin_seal` is the reason to record, sealed, that sealing begins
    now (None: it is sealed already, or not to be); `sealed_since` an earlier entry (seq, hash) sealing
    began at, for a log sealed before that record existed; `sealed_from` where the stored log is sealed
    from."""

    begin_seal: str | None = None
    sealed_since: tuple[int, str] | None = None
    sealed_from: int | None = None


async def check(engine: AsyncEngine, seal: Seal | None, anchor: LocalAnchor | None) -> Opening:
    """Raise AuditLogRefused if the stored log is not one to write on; else what to do first."""
    async with engine.connect() as conn:
        head, genesis = await load_head(conn), await load_genesis(conn)
        if anchor is not None:
            await _meets_anchor(conn, anchor, head, genesis)
        if seal is None:
            if genesis is not None:
                raise AuditLogRefused(f"the decision log is sealed (from entry {genesis.seq}): start with its seal "
                                      "key ([audit] seal_key_env); unsealed entries would break it")
            return Opening()
        if genesis is not None:
            if problem := await _sealed_problem(conn, seal, genesis, head):
                raise AuditLogRefused(f"{problem}. {_NOTHING}")
            return Opening(sealed_from=genesis.seq)
        first_sealed, count = await seal_traces(conn)
        if count == 0 and head is None:
            return Opening(begin_seal="the decision log is sealed from this entry on")
        if head is not None and first_sealed is not None and seal.holds(seal.head(head.seq, head.hash), head.seal) \
                and await hash_at(conn, head.seq) == head.hash:
            since = await hash_at(conn, first_sealed)
            if since is not None:  # a log sealed before the genesis record: its sealed head vouches for it
                return Opening(begin_seal=f"recorded on upgrade: this log is sealed from entry {first_sealed} on",
                               sealed_since=(first_sealed, since))
        if first_sealed is not None or (head is not None and head.seal is not None):
            raise AuditLogRefused("the decision log carries seals but no record that sealing began, and its head's "
                                  f"seal does not hold: its seals were stripped or it was rewritten. {_NOTHING}")
        raise AuditLogRefused(
            f"the decision log holds {count} entries, none of them sealed, and no record that sealing began. If it "
            "was never sealed, stop the gateway and run `memfed audit seal` once to seal it from there on; if it "
            "was, its seals were stripped: check it against an anchor you kept (`memfed audit verify --anchor`).")


async def _meets_anchor(conn: AsyncConnection, anchor: LocalAnchor, head: Head | None,
                        genesis: Genesis | None) -> None:  # fmt: skip
    if anchor.seq > 0:
        found = await hash_at(conn, anchor.seq)
        if found is None:
            raise AuditLogRefused(
                f"the decision log in the database ends at entry {head.seq if head else 0}, short of entry "
                f"{anchor.seq} this gateway stored: it was cut, emptied or put back to an earlier copy. "
                f"{_NOTHING} {_ASIDE}")
        if found != anchor.hash:
            raise AuditLogRefused(f"entry {anchor.seq} of the decision log is not the one this gateway stored: the "
                                  f"log was rewritten. {_NOTHING} {_ASIDE}")
    if anchor.sealed_from is not None and genesis is None:
        raise AuditLogRefused(f"this gateway sealed the decision log from entry {anchor.sealed_from}, and the "
                              f"record that sealing began is gone: the log's seals were stripped. {_NOTHING}")


async def _sealed_problem(conn: AsyncConnection, seal: Seal, genesis: Genesis, head: Head | None) -> str | None:
    if not seal.holds(seal.genesis(genesis.seq, genesis.hash), genesis.seal):
        return ("the record that sealing began does not carry this log's seal: it was forged or altered, or the "
                "seal key is not this log's")
    if head is None:
        return "the decision log is sealed and its sealed head is missing: entries were cut from its end"
    if not seal.holds(seal.head(head.seq, head.hash), head.seal):
        return "the decision log's head does not carry its seal: the log was rewritten or cut"
    if await hash_at(conn, head.seq) != head.hash:
        return f"entry {head.seq} is not the one the sealed head names: the log was rewritten"
    if await hash_at(conn, genesis.seq) != genesis.hash:
        return f"entry {genesis.seq}, where sealing began, was rewritten or removed"
    return None
