"""The plugin adapter: UHP Memories on a memory-provider plugin of the agent-kernel plugin protocol.

A plugin has no containers: it knows session, project and global scopes, no memory. So memfed acts as the
plugin's kernel and files each record under its memory itself (`isolation: enforced_filter`): the record's
slug starts with the memory's namespace (`m<12 hex of the memory id>-`), the ledger (`_ledger`) says which
memory each slug is in, and every record read back is checked against it. A memfed type travels as a
configured MemoryType and scope (`types`, `scope`, `scopes`), fixed at creation as the protocol demands;
a revise that changes the type to one of another MemoryType records anew and deletes the old slug.

What the plugin does not do, the adapter says (§10.2): UpdateRecord overwrites, so `history: none` (memfed
counts versions but keeps none); there is no closed state, so forget deletes the record at the plugin
(`forget: emulated`) and erase is the same call, every id erased also reported `unreachable` because what
a plugin keeps after DeleteRecord is not known; `text` is memfed's ranking over ListRecords (`emulated`),
`query` and `filters` are not answered; no `as_of`. Content is text only: no file is kept (`media` is
empty, so the gateway refuses a file part before it is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import secrets
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
    Part,
    ProviderError,
    ProviderRejected,
    Record,
    RecordNotFound,
    RecordTime,
    Reference,
    Revision,
    Writer,
)
from adapters.plugin._ledger import Entry, Ledger
from adapters.plugin._options import configurer, parse
from adapters.plugin._pb import memory_pb2 as pb
from adapters.plugin._reads import PluginReads, to_record
from adapters.plugin._supervisor import Supervisor
from adapters.ratification import PENDING_KEY
from adapters.versioning import not_before, or_keep, revised

_LINK = re.compile(r"\[\[([^\[\]\n]{1,200})\]\]")


def namespace(memory_id: str) -> str:
    """The slug prefix of a memory's records: its id's hex where it has one, else a hash of it."""
    tail = memory_id.removeprefix("hmem_")
    if not re.fullmatch(r"[0-9a-f]{12,}", tail):
        tail = hashlib.sha256(memory_id.encode()).hexdigest()
    return f"m{tail[:12]}"


def kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or "record"


def _blocks(content: Sequence[Part]) -> list[pb.ContentBlock]:
    blocks = []
    for part in content:
        if part.type != "text" or part.text is None:
            raise ProviderRejected("a plugin keeps text only: this record has a part that is not text")
        blocks.append(pb.ContentBlock(text=pb.TextBlock(text=part.text)))
    return blocks


def _check_attributes(attributes: Mapping[str, Any]) -> None:
    if PENDING_KEY in attributes:
        raise ProviderRejected(f"attributes.{PENDING_KEY} is the plugin's to say: a record cannot be written with it")


def _tombstone(entry: Entry) -> Record:
    """A forgotten record as the ledger remembers it: its last version's envelope, no content."""
    return Record(id=entry.record_id, memory_id=entry.memory_id, type=entry.type, content=(),
                  written_by=entry.written_by, time=RecordTime(written_at=entry.written_at),
                  version=entry.version, status="forgotten", supersedes=entry.version - 1,
                  attributes=entry.attributes, references=entry.references, write_id=entry.write_id)


def _capabilities() -> Capabilities:
    return Capabilities(
        isolation="enforced_filter", derivation="none", signals=("text",), emulated_signals=("text",),
        abstain=False, keeps_episodes=True, observe_answers="records", history_content="none",
        history_structure="none", revise="native", forget="emulated", erase_unreachable="reported",
        as_of=False, prime=True, types=False, graph_entities="stated", media=(), bytes="referenced",
        searches_many_memories=True, data_location="vendor",
    )


class PluginProvider(PluginReads):
    """A `Provider` over one plugin process."""

    def __init__(self, supervisor: Supervisor, ledger: Ledger, *, types: Mapping[str, int],
                 scope: int, scopes: Mapping[str, int]) -> None:
        self._supervisor = supervisor
        self._ledger = ledger
        self._types = dict(types)
        self._scope = scope
        self._scopes = dict(scopes)
        self._capabilities = _capabilities()
        self._slugs = asyncio.Lock()  # the kernel's duty: one slug probe and Record at a time

    @classmethod
    async def from_config(cls, options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path,
                          api_key: str | None) -> PluginProvider:
        """`AdapterFactory`; the options are read by `_options`. The provider's name is its data
        directory's. `client` and `api_key` are unused: a plugin is no HTTP vendor, and its secrets are
        named in `config`."""
        name = data_dir.name
        settings = parse(options, name)
        supervisor = Supervisor(settings.launch, settings.restart, configurer(settings))
        await supervisor.start()
        try:
            ledger = await Ledger.open(data_dir / "ledger.sqlite3")
        except BaseException:
            await supervisor.close()
            raise
        return cls(supervisor, ledger, types=settings.types, scope=settings.scope, scopes=settings.scopes)
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def ratifies(self) -> bool:
        """`RatifyingProvider`: whether the plugin declared ratification_supported."""
        plugin = self._supervisor.plugin
        return bool(plugin and plugin.capabilities.ratification_supported)

    async def approve(self, memory_id: str, record_id: str) -> Record:
        entry = await self._entry(memory_id, record_id)
        _, memory = self._supervisor.memory()
        try:
            await memory.call("ApproveRecord", pb.ApproveRecordRequest(id=entry.slug), pb.ApproveRecordResponse)
        except RecordNotFound:
            raise RecordNotFound(record_id) from None
        return await self.get(memory_id, record_id)

    async def reject(self, memory_id: str, record_id: str) -> None:
        entry = await self._entry(memory_id, record_id)
        _, memory = self._supervisor.memory()
        try:
            await memory.call("RejectRecord", pb.RejectRecordRequest(id=entry.slug), pb.RejectRecordResponse)
        except RecordNotFound:
            raise RecordNotFound(record_id) from None
        await self._ledger.drop(record_id)

    def document_extra(self) -> dict[str, Any]:
        """What the plugin declared, added to the provider's capability document under `x.memfed.plugin`."""
        return {"plugin": self.describe()}

    def describe(self) -> dict[str, Any]:
        """What the plugin declared at start, for the provider document and an operator."""
        plugin = self._supervisor.plugin
        caps = plugin.capabilities if plugin else pb.MemoryCapabilities()
        return {
            "package": plugin.memory.package if plugin and plugin.memory else None,
            "producer": {"name": plugin.producer.name, "version": plugin.producer.version} if plugin else None,
            "supported_types": [pb.MemoryType.Name(t) for t in caps.supported_types],
            "supported_scopes": [pb.MemoryScope.Name(s) for s in caps.supported_scopes],
            "ratification_supported": caps.ratification_supported,
            "hook_points": [pb.HookPoint.Name(h) for h in caps.supported_hook_points],
            "state": self._supervisor.state(),
            "restarts": self._supervisor.restarts,
            "tokens_counted": plugin.callbacks.counted if plugin and plugin.callbacks else 0,
        }

    # ------------------------------------------------------------------ writes

    def _kind(self, memfed_type: str) -> tuple[Any, Any]:  # (MemoryType, MemoryScope): ints the stubs type as enums
        plugin_type = self._types.get(memfed_type, self._types.get("note", pb.MEMORY_TYPE_PROJECT))
        return plugin_type, self._scopes.get(memfed_type, self._scope)

    async def _links(self, memory_id: str, content: Sequence[Part],
                     stated: Sequence[Reference]) -> tuple[tuple[Reference, ...], tuple[str, ...]]:
        """[[name]] links in the text, as the kernel parses them: a name that is a slug (or a record id) of
        this memory becomes a reference; a dangling one is kept to be found later, never refused."""
        names = [m.strip() for p in content for m in _LINK.findall(p.text or "")]
        if not names:
            return tuple(stated), ()
        mine = {e.slug: e.record_id for e in await self._ledger.of_memory(memory_id) if e.status != "forgotten"}
        ids = set(mine.values())
        refs, dangling = list(stated), []
        for name in dict.fromkeys(names):
            target = mine.get(name) or (name if name in ids else None)
            if target is None:
                dangling.append(name)
            elif all(r.record_id != target for r in refs):
                refs.append(Reference(memory_id, target, "links"))
        return tuple(refs), tuple(dangling)

    async def _record(self, memory_id: str, memfed_type: str, title: str | None,
                      blocks: list[pb.ContentBlock], entry: Entry | None = None) -> tuple[str, Any]:
        """Record at the plugin under a slug of this memory no other record holds, as the kernel must: the
        plugin overwrites an id it already has. The final slug is the plugin's answer.

        A new record's `entry` goes into the ledger before the call, under the slug asked: a write whose
        answer is lost (a timeout, a cancellation) can then be found by its write id (`find_write`), and
        one that never reached the plugin reads as not found. A call refused outright takes it out again."""
        plugin, memory = self._supervisor.memory()
        plugin_type, plugin_scope = self._kind(memfed_type)
        base = f"{namespace(memory_id)}-{kebab(title or memfed_type)}"
        async with self._slugs:
            # Slugs the ledger holds are skipped without a call; a free one is still probed at the plugin,
            # which may hold records memfed did not write.
            taken, slug, n = await self._ledger.slugs_from(base), base, 1
            while slug in taken or await self._held(memory, slug):
                n += 1
                slug = f"{base}-{n}"
            if entry is not None:
                await self._ledger.put(replace(entry, slug=slug))
            if plugin.broker is not None:
                await plugin.broker.announce()  # the plugin may count tokens through the broker
            try:
                answer = await memory.call("Record", pb.RecordRequest(type=plugin_type, scope=plugin_scope, id=slug,
                                                                      title=title or "", content=blocks),
                                           pb.RecordResponse)
            except ProviderError as exc:
                if entry is not None and not exc.maybe_applied:
                    await self._ledger.drop(entry.record_id)
                raise
            final = answer.result.id or slug
            if entry is not None and final != slug:
                await self._ledger.put(replace(entry, slug=final))
        return final, answer.result.status

    @staticmethod
    async def _held(memory: Any, slug: str) -> bool:
        try:
            await memory.call("GetRecord", pb.GetRecordRequest(id=slug), pb.GetRecordResponse)
        except RecordNotFound:
            return False
        return True

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        _check_attributes(record.attributes)
        blocks = _blocks(record.content)
        refs, dangling = await self._links(memory_id, record.content, record.references)
        entry = Entry(record_id="hrec_" + secrets.token_hex(16), memory_id=memory_id, slug="", type=record.type,
                      version=1, written_by=record.written_by, written_at=record.written_at,
                      valid_from=record.valid_from, valid_to=record.valid_to, titled=record.title is not None,
                      attributes=dict(record.attributes), references=refs, dangling=dangling,
                      write_id=record.write_id)
        slug, status = await self._record(memory_id, record.type, record.title, blocks, entry)
        entry = replace(entry, slug=slug)
        return to_record(entry, pb.MemoryRecord(id=slug, title=record.title or "", content=blocks, status=status))

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """`FindsWrites`: the record a write made, by the write id the ledger keeps with it. A new record's
        entry is written before the plugin is called, so a lost answer is found here if the plugin has the
        slug; a revise is found once its entry carries the write id (an UpdateRecord sent again replaces
        the content with the same content, so a repeat is harmless)."""
        entries = [await self._ledger.get(record_id)] if record_id else await self._ledger.of_memory(memory_id)
        for entry in entries:
            if entry is not None and entry.memory_id == memory_id and entry.write_id == write_id:
                if entry.status == "forgotten":
                    return _tombstone(entry)
                try:
                    return await self.get(memory_id, entry.record_id)
                except RecordNotFound:
                    return None
        return None

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """UpdateRecord with the whole content (the protocol replaces it wholesale); a type of another
        MemoryType or scope is a new Record and the old slug's DeleteRecord, since both are immutable."""
        entry = await self._entry(memory_id, record_id)
        current = await self.get(memory_id, record_id)
        if revision.write_id is not None and entry.write_id == revision.write_id:
            return current  # sent again after an answer was lost: the plugin has it already
        content = or_keep(revision.content, current.content)
        blocks = _blocks(content)
        title = revised(revision, "title", current.title)
        new_type = or_keep(revision.type, current.type)
        refs, dangling = await self._links(memory_id, content, or_keep(revision.references, current.references))
        _, memory = self._supervisor.memory()
        slug = entry.slug
        if revision.attributes is not None:
            _check_attributes(revision.attributes)
        if self._kind(new_type) != self._kind(entry.type):
            slug, status = await self._record(memory_id, new_type, title, blocks)
            with contextlib.suppress(RecordNotFound):
                await memory.call("DeleteRecord", pb.DeleteRecordRequest(id=entry.slug), pb.DeleteRecordResponse)
        else:
            plugin, _ = self._supervisor.memory()
            if plugin.broker is not None:
                await plugin.broker.announce()
            try:
                updated = await memory.call("UpdateRecord", pb.UpdateRecordRequest(id=slug, title=title or "",
                                                                                   content=blocks),
                                            pb.UpdateRecordResponse)
            except RecordNotFound:
                raise RecordNotFound(record_id) from None
            status = updated.result.status
        new = replace(entry, slug=slug, type=new_type, version=entry.version + 1, written_by=revision.written_by,
                      written_at=not_before(revision.written_at, entry.written_at),
                      valid_from=revised(revision, "valid_from", entry.valid_from),
                      valid_to=revised(revision, "valid_to", entry.valid_to), titled=title is not None,
                      attributes=dict(or_keep(revision.attributes, entry.attributes)), references=refs,
                      dangling=dangling, write_id=revision.write_id)
        await self._ledger.put(new)
        return to_record(new, pb.MemoryRecord(id=slug, title=title or "", content=blocks, status=status))

    async def _delete(self, entry: Entry) -> None:
        _, memory = self._supervisor.memory()
        with contextlib.suppress(RecordNotFound):  # already gone at the plugin: the ledger follows
            await memory.call("DeleteRecord", pb.DeleteRecordRequest(id=entry.slug), pb.DeleteRecordResponse)
        await self._ledger.drop(entry.record_id)

    async def forget(self, memory_id: str, record_id: str, by: Writer, at: datetime, *,
                     write_id: str | None = None) -> Record:
        """DeleteRecord: the protocol has no closed state. The answer is the forgotten version; nothing of
        it stays readable (history: none). The ledger keeps a tombstone without content, so the forget can
        be found by its write id."""
        current = await self.get(memory_id, record_id)
        entry = await self._entry(memory_id, record_id)
        _, memory = self._supervisor.memory()
        with contextlib.suppress(RecordNotFound):  # already gone at the plugin
            await memory.call("DeleteRecord", pb.DeleteRecordRequest(id=entry.slug), pb.DeleteRecordResponse)
        when = not_before(at, current.time.written_at)
        await self._ledger.put(replace(entry, version=entry.version + 1, written_by=by, written_at=when,
                                       write_id=write_id, status="forgotten"))
        return replace(current, version=current.version + 1, supersedes=current.version, status="forgotten",
                       written_by=by, time=replace(current.time, written_at=when), write_id=write_id)

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        """DeleteRecord per record of this memory. Whether the plugin keeps a copy (a file's history, a
        backup) is not knowable on this wire, so every erased id is also reported unreachable."""
        erased: list[str] = []
        for position, record_id in enumerate(dict.fromkeys(record_ids)):
            entry = await self._ledger.get(record_id)
            if entry is None or entry.memory_id != memory_id:
                continue
            try:
                await self._delete(entry)
            except ProviderError as exc:
                rest = [r for r in list(dict.fromkeys(record_ids))[position:]]
                raise ErasureIncomplete(str(exc), erased=tuple(erased), unreachable=tuple(erased),
                                        remaining=tuple(rest), reason=exc.reason) from exc
            erased.append(record_id)
        return Erasure(erased=tuple(erased), unreachable=tuple(erased))

    async def drop_memory(self, memory_id: str) -> None:
        for entry in await self._ledger.of_memory(memory_id):
            await self._delete(entry)

    async def close(self) -> None:
        """Stop the plugin through its controller, then close the ledger."""
        try:
            await self._supervisor.close()
        finally:
            await self._ledger.close()
