"""The mem0 adapter: UHP Memories on the mem0 Platform (hosted) or the mem0 OSS REST server.

mem0 has no container a memory could be: it keeps memories per entity id. So a memfed memory is one
entity, `user_id = entity_prefix + memory_id`, added to every write and search, and every memory fetched by
id is checked against it before anything is done with it (`isolation: enforced_filter`, §10.3). A record
is one mem0 memory; its id is `hrec_` followed by mem0's own UUID, so it is opaque to the gateway, reversible
here, and the same id an operator sees in mem0's dashboard.

What mem0 does not do, the adapter does and declares (§10.2):
- mem0 overwrites on update. Revise writes the new text and keeps every earlier version in memfed's
  metadata (see `_mem0_records`), so `revise` is emulated and history keeps versions.
- mem0 has no closed state. Forget marks the record forgotten in that metadata and leaves it stored, so its
  trace remains and it leaves reads (`forget: emulated`).
- mem0 keeps a memory's history rows after the memory is deleted, so erase puts every id whose history mem0
  still serves in `unreachable`.
- mem0 searches by meaning only: `query` is native, `text` is not declared, and `filters` over type,
  attributes and time are evaluated here on the records read back (`emulated`); asked together they
  are fused as on every provider (`_mem0_recall`).
- Neither variant can read a memory as it stood at an instant, so `as_of` is refused.
- The OSS server breaks under concurrent changes, so every change to one server waits its turn
  (`_mem0_turns`); it lists at most 1,000 memories of one entity, so a write that would make a memory
  unlistable is refused and the limit is declared (`records_per_memory`).

This module holds configuration, identity (which mem0 entity a memory is, which mem0 memory a record is)
and writes; reads and recall are in `_mem0_reads`, erase in `_mem0_erase`, which `Mem0Provider` inherits.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx
from cachetools import LRUCache

from adapters.base import (
    Capabilities,
    NewRecord,
    Part,
    ProviderRejected,
    ProviderUnavailable,
    Record,
    RecordLimit,
    RecordNotFound,
    RecordTime,
    Revision,
    Writer,
)
from adapters.mem0 import _records as records
from adapters.mem0._decoded import DecodedItems
from adapters.mem0._erase import Mem0Erase
from adapters.mem0._reads import PLATFORM_OR_CHUNK, Mem0Reads
from adapters.mem0._sizes import EntitySizes
from adapters.mem0.wire import ABSENT, DIALECTS, OSS_LIST_CAP, Secret, Wire
from adapters.version_format import BadMetadata
from adapters.versioning import not_before, or_keep, refuse_following, revised, tombstone

__all__ = ["PLATFORM_OR_CHUNK", "PLATFORM_URL", "RECORD_PREFIX", "Mem0Provider"]

log = logging.getLogger("memfed.adapters.mem0")

PLATFORM_URL = "https://api.mem0.ai"
RECORD_PREFIX = "hrec_"
# mem0 trims entity ids, refuses inner whitespace, and reads `*` as "every entity" in filters and in
# delete-all: an entity id is therefore held to a plain alphabet, so no memory can ever name them all.
_ENTITY_ID = re.compile(r"[A-Za-z0-9_.:\-]+")
_OPTIONS = {"base_url", "variant", "entity_prefix", "timeout"}


# An OSS listing that comes back with 1,000 memories cannot be told from a cut one, so a memory may hold
# one fewer to stay listable whole (and so exportable and movable).
OSS_RECORDS_PER_MEMORY = OSS_LIST_CAP - 1
# Writes made at mem0 outside memfed are not seen between two reads of the sizes: this close to the
# limit, the size is read again before each write.
_NEAR_LIMIT = 50


def _capabilities(searches_many_memories: bool, records_per_memory: int | None) -> Capabilities:
    return Capabilities(
        isolation="enforced_filter",
        derivation="none",  # every write is stored as stated (infer: false); mem0 is never asked to derive
        signals=("query", "filters"),
        emulated_signals=("filters",),
        abstain=False,
        keeps_episodes=True,
        observe_answers="records",
        history_content="versions",
        history_structure="versions",
        revise="emulated",
        forget="emulated",
        erase_unreachable="reported",
        as_of=False,
        types=False,
        graph_entities="stated",
        media=("*/*",),
        bytes="referenced",
        describes=(),
        searches_many_memories=searches_many_memories,
        records_per_memory=records_per_memory,
    )


class Mem0Provider(Mem0Reads, Mem0Erase):
    """A `Provider` over one mem0 project (Platform) or server (OSS)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str,
        variant: Literal["platform", "oss"],
        entity_prefix: str = "memfed-",
        timeout: float = 2.0,
    ) -> None:
        dialect = DIALECTS.get(variant)
        if dialect is None:
            raise ValueError(f"mem0 variant must be 'platform' or 'oss', not {variant!r}")
        if not _ENTITY_ID.fullmatch(entity_prefix):
            raise ValueError("mem0 entity_prefix may hold letters, digits and _ . : - only")
        if variant == "platform" and not api_key:
            raise ValueError("the mem0 Platform needs an API key")
        self.variant = variant
        self._prefix = entity_prefix
        self._entities: dict[str, str] = {}  # memory id -> entity id, checked once (a dict: read per item)
        self._decoded = DecodedItems()  # a memory asked again is not decoded again
        self._scopes = LRUCache(maxsize=64)  # the entities of a recall's memories (Mem0Recall._scope)
        self._wire = Wire(client, base_url=base_url, key=Secret(api_key), dialect=dialect, timeout=timeout)
        self._sizes = EntitySizes(self._wire)
        limit = OSS_RECORDS_PER_MEMORY if variant == "oss" else None
        self._capabilities = _capabilities(dialect.searches_many_memories, limit)

    @classmethod
    async def from_config(
        cls,
        options: Mapping[str, Any],
        *,
        client: httpx.AsyncClient,
        data_dir: Path,
        api_key: str | None,
    ) -> Mem0Provider:
        """Options: `variant` (required), `base_url` (required for oss), `entity_prefix`, `timeout`.

        `data_dir` is unused: everything this adapter keeps lives at mem0.
        """
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"unknown mem0 options: {', '.join(unknown)}")
        variant = options.get("variant")
        if variant not in ("platform", "oss"):
            raise ValueError("mem0 option 'variant' must be 'platform' or 'oss'")
        base_url = options.get("base_url") or (PLATFORM_URL if variant == "platform" else None)
        if not base_url:
            raise ValueError("mem0 option 'base_url' is required for the oss variant")
        return cls(
            client,
            base_url=str(base_url),
            api_key=api_key or "",
            variant=variant,
            entity_prefix=str(options.get("entity_prefix", "memfed-")),
            timeout=float(options.get("timeout", 2.0)),
        )

    def __repr__(self) -> str:
        return f"Mem0Provider(variant={self.variant!r}, wire={self._wire!r})"

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def probe(self) -> None:
        """Whether mem0 answers and takes memfed's key (asked once at start; gateway/federation/preflight.py)."""
        await self._wire.send(self._wire.dialect.ping(self._prefix + "probe"))

    # ------------------------------------------------------------------ identity

    def _entity(self, memory_id: str) -> str:
        # Kept: a recall over a thousand memories asks for every entity id, on the event loop.
        if (entity := self._entities.get(memory_id)) is None:
            if not _ENTITY_ID.fullmatch(memory_id):
                raise ProviderRejected("a memory id mem0 cannot hold as an entity id")
            if len(self._entities) >= 200_000:
                self._entities.clear()
            entity = self._entities[memory_id] = self._prefix + memory_id
        return entity

    @staticmethod
    def _vendor_id(record_id: str) -> str | None:
        """mem0's id for a record id, or None when the id cannot name a mem0 memory at all."""
        if not record_id.startswith(RECORD_PREFIX):
            return None
        rest = record_id[len(RECORD_PREFIX) :]
        try:
            canonical = str(uuid.UUID(rest))
        except ValueError:
            return None
        # Only the canonical spelling names a record, so one record has one id (and the path is safe).
        return canonical if canonical == rest else None

    def _stored(self, item: Mapping[str, Any], memory_id: str) -> records.Stored | None:
        """The record in `item` if it belongs to `memory_id`; None if it belongs to anything else."""
        vendor_id = item.get("id")
        if item.get("user_id") != self._entity(memory_id) or not isinstance(vendor_id, str):
            return None
        record_id = RECORD_PREFIX + vendor_id
        if self._vendor_id(record_id) is None:
            log.warning("mem0 returned a memory whose id is not a UUID; it cannot be addressed, skipped")
            return None
        try:
            return self._decoded.decode(item, record_id=record_id, memory_id=memory_id)
        except records.OtherMemory:
            log.warning("mem0 memory %s is filed under this entity but names another memory", vendor_id)
            return None
        except BadMetadata as exc:
            # Someone changed memfed's metadata at mem0 itself. Refusing would make the whole memory
            # unreadable; the record is shown as mem0 holds it, as if memfed had never written it.
            log.warning("mem0 memory %s carries memfed metadata memfed cannot read: %s", vendor_id, exc)
        try:
            return records.foreign(item, record_id=record_id, memory_id=memory_id)
        except BadMetadata as exc:
            raise ProviderUnavailable(f"mem0 memory {vendor_id} is in a shape memfed cannot read") from exc

    async def _fetch(self, memory_id: str, record_id: str) -> tuple[str, records.Stored]:
        entity = self._entity(memory_id)  # refuses a bad memory id before any call
        vendor_id = self._vendor_id(record_id)
        if vendor_id is None:
            raise RecordNotFound(record_id)
        item = await self._wire.send(self._wire.dialect.get(vendor_id), absent_ok=True)
        if item is ABSENT or item is None:  # the OSS server answers an unknown id with `null`
            raise RecordNotFound(record_id)
        if not isinstance(item, Mapping):
            raise ProviderUnavailable("mem0 answered a get with something that is not a memory")
        stored = self._stored(item, memory_id)
        if stored is None:
            # Another memory's record looks exactly like no record at all (§12, memory_record_not_found).
            log.debug("record fetched by id is not in entity %s", entity)
            raise RecordNotFound(record_id)
        return vendor_id, stored

    # ------------------------------------------------------------------ writes

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        entity = self._entity(memory_id)
        _check_content(record.content)
        draft = Record(
            id="",
            memory_id=memory_id,
            type=record.type,
            content=record.content,
            written_by=record.written_by,
            time=RecordTime(
                written_at=record.written_at, valid_from=record.valid_from, valid_to=record.valid_to
            ),
            title=record.title,
            attributes=record.attributes,
            references=record.references,
            write_id=record.write_id,
        )
        text, metadata = _encoded(draft)
        body = await self._add(entity, text, metadata)
        try:
            vendor_id = self._wire.dialect.added_id(body)
        except ValueError as exc:
            raise ProviderUnavailable(f"mem0 did not say which memory it stored: {exc}") from exc
        record_id = RECORD_PREFIX + vendor_id
        if self._vendor_id(record_id) is None:
            raise ProviderUnavailable("mem0 stored the record under an id that is not a UUID")
        return replace(draft, id=record_id)

    async def _add(self, entity: str, text: str, metadata: Mapping[str, Any]) -> Any:
        """Add one memory; where the server lists a bounded number per entity, only while the entity stays
        listable whole. The size is read and the add made in one turn of the server (`_mem0_turns`), so
        two writes racing for the last place cannot both have it."""
        call = self._wire.dialect.add(entity, text, metadata)
        limit = self._capabilities.records_per_memory
        if limit is None:
            return await self._wire.send(call)

        async def within_limit() -> Any:
            held = await self._sizes.of(entity)
            if held >= limit - _NEAR_LIMIT:
                held = await self._sizes.of(entity, fresh=True)
            if held >= limit:
                raise RecordLimit(
                    f"this memory holds {held} records at the mem0 OSS server (forgotten ones included), "
                    f"which lists at most {OSS_LIST_CAP} of one memory and {limit} provably whole: another "
                    "record could never be listed, exported or moved. Erase records or move the memory to "
                    "another provider first"
                )
            body = await self._wire.exchange(call)
            self._sizes.added(entity)
            return body

        return await self._wire.one_change(within_limit)

    async def _write(self, vendor_id: str, record_id: str, current: Record, past: Sequence[Record]) -> None:
        text, metadata = _encoded(current, past)
        answer = await self._wire.send(self._wire.dialect.update(vendor_id, text, metadata), absent_ok=True)
        if answer is ABSENT:
            raise RecordNotFound(record_id)  # deleted between our read and our write

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """Version n+1 over the current one. mem0 overwrites in place, so the version it replaces goes
        into memfed's metadata first; mem0 has no conditional update, so two revisions of one record at
        the same instant can lose one of them (the gateway serializes writes to a record)."""
        if revision.content is not None:
            _check_content(revision.content)
        vendor_id, stored = await self._fetch(memory_id, record_id)
        if revision.write_id is not None and (done := records.written_by(stored, revision.write_id)) is not None:
            return done  # sent again after an answer was lost: mem0 has it already
        cur = stored.current
        refuse_following(cur, "revised")
        at = not_before(revision.written_at, cur.time.written_at)
        new = Record(
            id=cur.id,
            memory_id=memory_id,
            type=or_keep(revision.type, cur.type),
            title=revised(revision, "title", cur.title),
            content=or_keep(revision.content, cur.content),
            attributes=or_keep(revision.attributes, cur.attributes),
            references=or_keep(revision.references, cur.references),
            version=cur.version + 1,
            supersedes=cur.version,
            written_by=revision.written_by,
            time=RecordTime(
                written_at=at,
                valid_from=revised(revision, "valid_from", cur.time.valid_from),
                valid_to=revised(revision, "valid_to", cur.time.valid_to),
            ),
            follows=cur.follows,
            write_id=revision.write_id,
        )
        # A forgotten record may be revised, as on the local provider: the revision is a new statement
        # and the chain keeps the forget before it.
        await self._write(vendor_id, record_id, new, (*stored.past, records.closed(cur, at=at)))
        return new

    async def forget(
        self, memory_id: str, record_id: str, by: Writer, at: datetime, *, write_id: str | None = None
    ) -> Record:
        """A version with status forgotten that repeats the last content, so history shows what was
        forgotten, by whom and when. The memory stays at mem0 (deleting it is erase, not forget)."""
        vendor_id, stored = await self._fetch(memory_id, record_id)
        if write_id is not None and (done := records.written_by(stored, write_id)) is not None:
            return done
        cur = stored.current
        refuse_following(cur, "forgotten")
        if cur.status == "forgotten":
            return cur
        forgotten = tombstone(cur, by=by, at=at, write_id=write_id)
        closed = records.closed(cur, at=forgotten.time.written_at)
        await self._write(vendor_id, record_id, forgotten, (*stored.past, closed))
        return forgotten

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version the write `write_id` made (`FindsWrites`), read from memfed's metadata at mem0: the
        record's own when its id is known, else every record of the memory. mem0 may apply a request after
        its client gave up, so "not found" holds as of this call only (the gateway waits `write_settle`)."""
        if record_id is not None:
            try:
                _, stored = await self._fetch(memory_id, record_id)
            except RecordNotFound:
                return None
            return records.written_by(stored, write_id)
        for stored in await self._all(memory_id):
            if (found := records.written_by(stored, write_id)) is not None:
                return found
        return None

    async def drop_memory(self, memory_id: str) -> None:
        await self._wire.send(self._wire.dialect.delete_all(self._entity(memory_id)))
        self._sizes.dropped(self._entity(memory_id))

    async def close(self) -> None:
        """Nothing to release: the HTTP client belongs to the gateway, which closes it."""


# --------------------------------------------------------------------------- helpers


def _check_content(content: Sequence[Part]) -> None:
    for part in content:
        if part.type == "file" and part.file is None:
            raise ProviderRejected("a file part must name its file")


def _encoded(current: Record, past: Sequence[Record] = ()) -> tuple[str, dict[str, Any]]:
    try:
        return records.encode(current, past)
    except records.Unstorable as exc:
        raise ProviderRejected(f"the record cannot be stored at mem0: {exc}") from exc
