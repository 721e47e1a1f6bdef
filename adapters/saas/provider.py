"""The SaaS memory adapter: UHP Memories on a hosted memory API of records with kinds, tiers, importance,
recency and supersession (shared/vendors/saas-memory.md).

The vendor's tenant comes from the API key and is never sent. Below it, a memfed memory is one scope:
`scope_id = actor_id = scope_prefix + memory id`, with `app_id` from the configuration. `actor_id` is set
because a record without one is tenant-shared, which every actor's recall sees; memfed never writes one,
and every record it reads is checked against all three before it is used (`isolation: enforced_filter`):
a record another client filed in the scope without the actor is not this memory's.

A record is a supersession chain at the vendor: its id is `hrec_` + the vendor id of the chain's first
record, revise supersedes the head (the vendor keeps the old one as history), forget sets the head's
expiry to the forget time (hidden from recall, still listed) and erase is the vendor's permanent forget by
ids over the whole chain. Episodes go through the vendor's ingest jobs (`_ingest`); reads and recall are
in `_reads`, which this class inherits.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from adapters.base import (
    Capabilities,
    Erasure,
    ErasureIncomplete,
    NewRecord,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
    Record,
    RecordNotFound,
    RecordTime,
    Revision,
    Writer,
)
from adapters.saas import _records as records
from adapters.saas import wire as w
from adapters.saas._ingest import SaasIngest
from adapters.saas._reads import RECORD_PREFIX, SaasReads
from adapters.versioning import not_before, or_keep, refuse_following, revised

__all__ = ["RECORD_PREFIX", "SaasProvider"]

log = logging.getLogger("memfed.adapters.saas")

# Scope and app ids travel in bodies and query strings and are compared exactly: a plain alphabet.
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")
PROBE_SCOPE = "_probe"  # no memory id starts with "_", so no memory's scope is ever this one
_RACES = 8  # supersedes of one record that may lose a race to another before the revise gives up
_OPTIONS = {"base_url", "timeout", "app_id", "scope_prefix", "vector_search", "derivation", "ingest_poll",
            "ingest_polls"}


def _capabilities(*, vector_search: bool, derivation: str) -> Capabilities:
    return Capabilities(
        isolation="enforced_filter",
        derivation="agent" if derivation == "agent" else "none",
        signals=("query", "text", "filters"),
        # text is the lexical half of the vendor's recall; meaning without embedding is words alone.
        emulated_signals=("text",) if vector_search else ("query", "text"),
        abstain=False,
        keeps_episodes=True,  # raw ingest keeps every episode as one episodic record
        observe_answers="records",  # jobs are polled to their end inside the call
        history_content="versions",
        history_structure="versions",
        revise="native",
        forget="emulated",  # the vendor's forget deletes; memfed's keeps the trace, by expiry
        erase_unreachable="reported",
        as_of=False,
        types=False,
        graph_entities="stated",
        media=("*/*",),
        bytes="referenced",
        searches_many_memories=False,  # one recall names one scope_id
    )


class SaasProvider(SaasReads, SaasIngest):
    """A `Provider` over one tenant of the SaaS memory API."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, api_key: str, app_id: str = "memfed",
                 scope_prefix: str = "memfed-", timeout: float = 2.0, vector_search: bool = True,
                 derivation: str = "none", ingest_poll: float = 0.2, ingest_polls: int = 8) -> None:
        if not api_key:
            raise ValueError("the SaaS memory API needs an API key (api_key_env)")
        if not _SCOPE_ID.fullmatch(app_id) or not _SCOPE_ID.fullmatch(scope_prefix):
            raise ValueError("saas app_id and scope_prefix may hold letters, digits and _ . : - only")
        if derivation not in ("none", "agent"):
            raise ValueError("saas derivation must be 'none' or 'agent'")
        if ingest_poll < 0 or ingest_polls < 1:
            raise ValueError("saas ingest_poll must be >= 0 and ingest_polls >= 1")
        self._app = app_id
        self._prefix = scope_prefix
        self._wire = w.Wire(client, base_url=base_url, key=w.Secret(api_key), timeout=timeout)
        self._vector_search = vector_search
        self._derivation = derivation
        self._capabilities = _capabilities(vector_search=vector_search, derivation=derivation)
        self._smart = derivation == "agent"
        self._poll_every = ingest_poll
        self._polls = ingest_polls
        self._turns = _Turns()

    @classmethod
    async def from_config(cls, options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path,
                          api_key: str | None) -> SaasProvider:
        """Options: `base_url` (required), `app_id`, `scope_prefix`, `timeout`, `vector_search` (whether the
        operator enabled embedding), `derivation` ("none" or "agent": smart ingest of observed episodes),
        `ingest_poll` (seconds between job polls) and `ingest_polls` (how many before giving up; the
        defaults, 0.2 s and 8, fit in the provider's default 2 s `timeout`, which bounds the whole call).
        `data_dir` is unused: everything this adapter keeps lives at the vendor."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"unknown saas options: {', '.join(unknown)}")
        if not options.get("base_url"):
            raise ValueError("saas option 'base_url' is required")
        vector = options.get("vector_search", True)
        if not isinstance(vector, bool):
            raise ValueError("saas option 'vector_search' must be true or false")
        return cls(
            client,
            base_url=str(options["base_url"]),
            api_key=api_key or "",
            app_id=str(options.get("app_id", "memfed")),
            scope_prefix=str(options.get("scope_prefix", "memfed-")),
            timeout=float(options.get("timeout", 2.0)),
            vector_search=vector,
            derivation=str(options.get("derivation", "none")),
            ingest_poll=float(options.get("ingest_poll", 0.2)),
            ingest_polls=int(options.get("ingest_polls", 8)),
        )

    def __repr__(self) -> str:
        return f"SaasProvider(app_id={self._app!r}, wire={self._wire!r})"

    def capabilities(self) -> Capabilities:
        """What the configuration allows, narrowed by what the vendor last said: `query` is declared
        emulated while the vendor answers recalls without its vector list, whatever the operator set."""
        return self._capabilities

    def _embedding_seen(self, embedded: bool) -> None:
        """The vendor said whether its vector list took part (the probe's recall or any other)."""
        self._capabilities = _capabilities(vector_search=self._vector_search and embedded,
                                           derivation=self._derivation)

    async def probe(self) -> None:
        """Whether the vendor answers and takes memfed's key, and whether it embeds (asked at start): one
        recall of a scope no memory has, whose answer carries only the `embedding` flag."""
        await self._wire.send(w.stats())
        if self._vector_search:
            scope = {w.F_ACTOR: self._prefix + PROBE_SCOPE, w.F_APP: self._app, w.F_SCOPE: self._prefix + PROBE_SCOPE}
            _, embedded = w.recalled(await self._wire.send(w.recall(scope, query="memfed probe", limit=1)))
            self._embedding_seen(embedded)

    # ------------------------------------------------------------------ identity

    def _scope(self, memory_id: str) -> dict[str, str]:
        scope = self._prefix + memory_id
        if not memory_id or not _SCOPE_ID.fullmatch(scope):
            raise ProviderRejected("a memory id the SaaS memory API cannot hold as a scope id")
        return {w.F_ACTOR: scope, w.F_APP: self._app, w.F_SCOPE: scope}

    def _ours(self, item: Mapping[str, Any], memory_id: str) -> bool:
        """Whether a vendor record is this memory's: its scope, its actor (never tenant-shared), our app."""
        scope = self._scope(memory_id)
        return all(item.get(k) == v for k, v in scope.items()) and isinstance(item.get(w.F_ID), str)

    async def _item(self, vendor_id: str, memory_id: str) -> Mapping[str, Any] | None:
        if not w.VENDOR_ID.fullmatch(vendor_id):
            return None
        item = await self._wire.send(w.get(vendor_id), absent_ok=True)
        if item is w.ABSENT:
            return None
        if not isinstance(item, Mapping):
            raise ProviderUnavailable("the SaaS memory API answered a get with something that is not a record")
        return item if self._ours(item, memory_id) else None

    async def _chain(self, memory_id: str, record_id: str) -> list[Mapping[str, Any]]:
        """The vendor records of one memfed record, oldest first; RecordNotFound when it is not this
        memory's (another memory's record looks exactly like no record at all)."""
        self._scope(memory_id)  # refuses a bad memory id before any call
        root_id = record_id.removeprefix(RECORD_PREFIX) if record_id.startswith(RECORD_PREFIX) else ""
        root = await self._item(root_id, memory_id) if root_id else None
        if root is None:
            raise RecordNotFound(record_id)
        before = root.get(w.F_SUPERSEDES)
        if isinstance(before, str) and await self._item(before, memory_id) is not None:
            raise RecordNotFound(record_id)  # a later link of a chain: the record is named by its first
        chain = [root]
        while isinstance(nxt := chain[-1].get(w.F_SUPERSEDED_BY), str) and len(chain) < 10_000:
            item = await self._item(nxt, memory_id)
            if item is None:
                break  # the vendor lost or moved the successor: the last one we hold is current
            chain.append(item)
        return chain

    def _versions(self, chain: Sequence[Mapping[str, Any]], memory_id: str) -> list[Record]:
        return records.chain_versions(chain, record_id=RECORD_PREFIX + str(chain[0][w.F_ID]), memory_id=memory_id)

    # ------------------------------------------------------------------ writes

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        scope = self._scope(memory_id)
        draft = Record(
            id="", memory_id=memory_id, type=record.type, content=record.content, written_by=record.written_by,
            time=RecordTime(written_at=record.written_at, valid_from=record.valid_from, valid_to=record.valid_to),
            title=record.title, attributes=record.attributes, references=record.references,
            write_id=record.write_id,
        )  # fmt: skip
        _check_content(draft)
        body = {**records.fields(draft), **scope}
        if record.type == "episode":
            item = await self._ingested(memory_id, draft, body)
        else:
            item = await self._wire.send(w.store(body, idempotency_key=_key("store", record.write_id)))
        return self._written(item, memory_id)

    def _written(self, item: Any, memory_id: str) -> Record:
        if not isinstance(item, Mapping) or not self._ours(item, memory_id) or not w.VENDOR_ID.fullmatch(
                str(item.get(w.F_ID))):
            raise ProviderUnavailable("the SaaS memory API answered a write with a record memfed cannot read")
        return self._versions([item], memory_id)[-1]

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """Supersede the chain's head. Changes of one record wait their turn in this process (a revise
        and a forget both read the head, then write it). Another gateway's revise of the same head may
        still win: the vendor takes only the first supersede of a head, so this one reads the chain
        again and supersedes the new head, and both are kept, one after the other."""
        async with self._turns.of(record_id):
            for _ in range(_RACES - 1):
                try:
                    return await self._revise_once(memory_id, record_id, revision)
                except w.Superseded:
                    log.info("a saas record was superseded while it was revised; revising the new head")
            return await self._revise_once(memory_id, record_id, revision)

    async def _revise_once(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        chain = await self._chain(memory_id, record_id)
        versions = self._versions(chain, memory_id)
        if revision.write_id is not None and (done := _by_write(versions, revision.write_id)) is not None:
            return done  # sent again after an answer was lost: the vendor has it already
        cur = versions[-1]
        refuse_following(cur, "revised")
        at = not_before(revision.written_at, cur.time.written_at)
        new = replace(
            cur, type=or_keep(revision.type, cur.type), title=revised(revision, "title", cur.title),
            content=or_keep(revision.content, cur.content), attributes=or_keep(revision.attributes, cur.attributes),
            references=or_keep(revision.references, cur.references), status="active",
            version=cur.version + 1, supersedes=cur.version,
            written_by=revision.written_by, write_id=revision.write_id,
            time=RecordTime(written_at=at, valid_from=revised(revision, "valid_from", cur.time.valid_from),
                            valid_to=revised(revision, "valid_to", cur.time.valid_to)),
        )  # fmt: skip
        _check_content(new)
        head = str(chain[-1][w.F_ID])
        body = {**records.fields(new, root=str(chain[0][w.F_ID])), **self._scope(memory_id)}
        # The key names the head too: a retry after a race supersedes another head, a new request.
        key = _key(f"revise-{head}", revision.write_id)
        item = await self._wire.send(w.supersede(head, body, idempotency_key=key))
        if not isinstance(item, Mapping) or not self._ours(item, memory_id):
            raise ProviderUnavailable("the SaaS memory API answered a supersede with a record memfed cannot read")
        now = await self._item(head, memory_id)
        if now is not None and records.held_count(now) != records.held_count(chain[-1]):
            # Another gateway forgot the head after this read: the new version comes after that forget.
            return self._versions(await self._settle(memory_id, record_id), memory_id)[-1]
        return self._versions([*chain, item], memory_id)[-1]

    async def _settle(self, memory_id: str, record_id: str) -> list[Mapping[str, Any]]:
        """The chain, with every record's own version number put right where a race between two gateways
        (a forget and a revise of one head) left it off its place, so a record read alone (a recall hit)
        and the chain agree. Idempotent: each gateway that saw the race may run it."""
        chain = await self._chain(memory_id, record_id)
        place = 1
        for index, item in enumerate(chain):
            stored = records.number_of(item)
            if stored is not None and stored != place:
                fixed = await self._wire.send(w.correct(str(item[w.F_ID]), records.renumbered(item, place),
                                                        idempotency_key=None))
                if isinstance(fixed, Mapping) and self._ours(fixed, memory_id):
                    chain[index] = fixed
            place += records.held_count(chain[index])
        return chain

    async def forget(self, memory_id: str, record_id: str, by: Writer, at: datetime, *,
                     write_id: str | None = None) -> Record:
        """Expire the head now, with who and when in memfed's metadata: hidden from the vendor's recall,
        still listed, and history shows what was forgotten. Deleting is erase, not forget. A head another
        gateway superseded meanwhile keeps the forget (it came first) and the chain is renumbered."""
        async with self._turns.of(record_id):
            chain = await self._chain(memory_id, record_id)
            versions = self._versions(chain, memory_id)
            if write_id is not None and (done := _by_write(versions, write_id)) is not None:
                return done
            cur = versions[-1]
            refuse_following(cur, "forgotten")
            if cur.status == "forgotten":
                return cur
            forgotten = records.Forgotten(by=by, at=not_before(at, cur.time.written_at), write_id=write_id)
            head = chain[-1]
            item = await self._wire.send(w.correct(str(head[w.F_ID]), records.forget_fields(head, forgotten),
                                                   idempotency_key=_key("forget", write_id)))
            if not isinstance(item, Mapping) or not self._ours(item, memory_id):
                raise ProviderUnavailable("the SaaS memory API answered a forget with a record memfed cannot read")
            if item.get(w.F_SUPERSEDED_BY) is None:
                return self._versions([*chain[:-1], item], memory_id)[-1]
            settled = self._versions(await self._settle(memory_id, record_id), memory_id)
            return settled[sum(records.held_count(i) for i in chain)]  # the tombstone, where it now stands

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        """The vendor's permanent forget by ids, over every record of each chain. The vendor deletes for
        good and keeps no copy memfed knows of, so `unreachable` is empty; an id whose forget failed is
        named in `ErasureIncomplete.remaining`, never reported erased."""
        erased: list[str] = []
        failures: list[tuple[str, ProviderError]] = []
        for record_id in dict.fromkeys(record_ids):
            try:
                chain = await self._chain(memory_id, record_id)
                await self._wire.send(w.forget_ids([str(item[w.F_ID]) for item in chain]))
            except RecordNotFound:
                continue  # not this memory's, or gone already: not reported
            except ProviderError as exc:
                failures.append((record_id, exc))
                continue
            erased.append(record_id)
        if not failures:
            return Erasure(erased=tuple(erased), unreachable=())
        if not erased:
            raise failures[0][1]
        raise ErasureIncomplete(f"the SaaS memory API erased {len(erased)} records and failed on {len(failures)}",
                                erased=tuple(erased), unreachable=(), remaining=tuple(r for r, _ in failures),
                                reason=failures[0][1].reason)

    async def drop_memory(self, memory_id: str) -> None:
        """Every record of the memory's scope, by one bulk forget that names the scope (never empty)."""
        await self._wire.send(w.forget_scope(self._scope(memory_id)))

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version the write `write_id` made (`FindsWrites`), from memfed's metadata at the vendor."""
        if record_id is not None:
            try:
                return _by_write(self._versions(await self._chain(memory_id, record_id), memory_id), write_id)
            except RecordNotFound:
                return None
        for chain in await self._chains(memory_id):
            if (found := _by_write(self._versions(chain, memory_id), write_id)) is not None:
                return found
        # An episode whose ingest ran but whose metadata never arrived is not found here: sent again, its
        # ingest carries the same Idempotency-Key, so the vendor answers with the same job and record.
        return None

    async def close(self) -> None:
        """Nothing to release: the HTTP client belongs to the gateway, which closes it."""


class _Turns:
    """One change at a time per record in this process: a revise or a forget reads the chain's head and
    then writes it, and a second change in between would build on a stale head. Locks are kept only
    while someone holds or waits for one."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def of(self, record_id: str) -> asyncio.Lock:
        lock = self._locks.get(record_id)
        if lock is None:
            lock = self._locks[record_id] = asyncio.Lock()
        return lock


def _by_write(versions: Sequence[Record], write_id: str) -> Record | None:
    return next((v for v in reversed(versions) if v.write_id == write_id), None)


def _key(operation: str, write_id: str | None) -> str | None:
    """The Idempotency-Key of a write: memfed's write id, per operation, so a repeat is answered once."""
    return f"memfed-{operation}-{write_id}" if write_id else None


def _check_content(record: Record) -> None:
    for part in record.content:
        if part.type == "file" and part.file is None:
            raise ProviderRejected("a file part must name its file")
