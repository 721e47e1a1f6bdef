"""A provider swap: copy every record of a memory (or a subtree) to another provider, then switch.

The order is what makes it safe to stop at any point:
1. Copy. Every version of every record goes to the target with its writer and time (`_replay`), and
   each step is written down (`_migration_log`) as soon as the target has it. The binding is not
   touched, so readers and writers keep using the source, which keeps every record.
2. Catch up. The source is read again; what was written, revised, forgotten or erased there meanwhile
   is carried over. This repeats until a pass finds nothing new (or the migration gives up as busy).
3. Switch, one memory at a time: its alias rows and its new binding in one transaction.
A failure before the switch leaves the binding as it was and deletes nothing at the source; a rerun
finds the log and goes on. Records a failed call may still have written at the target (a timeout
after the vendor stored it) are found on the rerun and adopted when they match, or erased.

The source's records are left where they are after the switch (unreachable through the gateway,
since the memory is bound elsewhere) unless `purge_source` drops them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from adapters import degraded as entries
from adapters.base import Erasure, Provider, ProviderError, Record, RecordNotFound, Unsupported
from gateway.federation.providers import ProviderHandle
from gateway.migration._log import Copied, MigrationLog
from gateway.migration._replay import CopyError, Item, Replay, check_target, every_record, gather, history, versions_at
from gateway.migration.export_format import version_json
from gateway.state.tree import MemoryNode

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("memfed.migration")

MAX_PASSES = 4  # the first copy and up to three catch-ups; a memory still changing after that is busy
Progress = Callable[[int, int], None]  # (records finished in this pass, records to copy in this pass)


@dataclass
class MemoryReport:
    id: str
    source: str
    records: int = 0  # records of this memory at the target when the migration ended
    dropped_leftovers: int = 0  # records a past migration away had left at the target, cleared first
    adopted: int = 0  # copies a failed call had written after all, taken over on a rerun
    erased: int = 0  # copies of records erased at the source while copying, erased at the target too
    switched: bool = False
    purged_source: bool = False


@dataclass
class MigrationReport:
    id: str
    memory_id: str
    to: str
    recursive: bool
    status: str = "running"
    resumed: bool = False
    started_at: int = 0
    finished_at: int | None = None
    copied: int = 0
    versions_written: int = 0
    passes: int = 0
    source_kept: bool = True
    memories: list[MemoryReport] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    error: str = ""

    def document(self) -> dict[str, Any]:
        return {"object": "memory.migration", **asdict(self)}


def _fingerprint(version: Record) -> tuple[Any, ...]:
    """What identifies a copy of a first version regardless of its id and of rewritten references."""
    doc = version_json(version)
    return (doc["type"], doc["title"], repr(doc["content"]), repr(doc["attributes"]), repr(doc["written_by"]),
            doc["time"]["written_at"])


class Swap:
    def __init__(self, services: Services, memory_id: str, to: str, *, recursive: bool = False,
                 purge_source: bool = False, progress: Progress | None = None) -> None:
        self.services = services
        self.memory_id = memory_id
        self.to = to
        self.recursive = recursive
        self.purge_source = purge_source
        self.progress = progress or (lambda done, total: None)
        self.log = MigrationLog(services.store)

    def _scope(self) -> tuple[ProviderHandle, list[tuple[MemoryNode, ProviderHandle]]]:
        tree = self.services.store.tree
        if tree.get(self.memory_id) is None:
            raise CopyError("memory_not_found", "No such memory.")
        target = self.services.providers.get(self.to)
        if target is None:
            raise CopyError("memory_invalid", f"No provider named {self.to!r} is configured.", {"param": "to"})
        ids = tree.subtree(self.memory_id) if self.recursive else [self.memory_id]
        scope = []
        for node in (tree.get(i) for i in ids):
            if node is None or node.provider == self.to:
                continue  # already there: nothing to copy, nothing to switch
            source = self.services.providers.get(node.provider)
            if source is None:
                raise CopyError("memory_unavailable", f"Memory {node.id} is on provider {node.provider!r}, which "
                                "is not connected.", {"provider": node.provider, "reason": "not_connected"})
            scope.append((node, source))
        return target, scope

    async def run(self) -> MigrationReport:
        target, scope = self._scope()
        row, resumed = await self.log.open(self.memory_id, self.to, self.recursive)
        report = MigrationReport(row.id, self.memory_id, self.to, self.recursive, resumed=resumed,
                                 started_at=row.started_at,
                                 memories=[MemoryReport(node.id, node.provider) for node, _ in scope])
        try:
            while True:
                report.passes += 1
                changed = await self._pass(report, target, scope)
                if not changed:
                    break
                if report.passes >= MAX_PASSES:
                    raise CopyError("memory_busy", "The memory kept changing while it was copied; run the "
                                    "migration again when it is quieter (it resumes).")
            await self._switch(report, scope)
        except Exception as exc:
            error = _as_copy_error(exc)
            report.copied = len(await self.log.copied(report.id))
            final = await self.log.finish(report.id, "failed", report.copied, error.message)
            report.status, report.finished_at, report.error = "failed", final.finished_at, error.message
            error.detail["migration"] = report.document()
            raise error from exc
        final = await self.log.finish(report.id, "completed", report.copied)
        report.status, report.finished_at = "completed", final.finished_at
        return report

    async def _pass(self, report: MigrationReport, target: ProviderHandle,
                    scope: list[tuple[MemoryNode, ProviderHandle]]) -> bool:
        """One read of every source and one write of what the target lacks; True if anything changed."""
        copied = await self.log.copied(report.id)
        changed = 0
        items: list[Item] = []
        by_memory = {m.id: m for m in report.memories}
        for node, source in scope:
            mine = {old: c for (memory_id, old), c in copied.items() if memory_id == node.id}
            node_changed, node_items = await self._read_memory(report, by_memory[node.id], node, source, target,
                                                               mine)
            changed += node_changed
            items.extend(node_items)
        check_target(target, items)
        versions_written = await self._write(report, target, items)
        counts: dict[str, int] = {}
        for item in items:
            counts[item.memory_id] = counts.get(item.memory_id, 0) + 1
        for mem in report.memories:
            mem.records = counts.get(mem.id, 0)
        report.copied = len(items)
        return bool(changed or versions_written)

    async def _read_memory(self, report: MigrationReport, mem: MemoryReport, node: MemoryNode,
                           source: ProviderHandle, target: ProviderHandle,
                           mine: dict[str, Copied]) -> tuple[int, list[Item]]:  # fmt: skip
        """One memory's records as items still to copy, after clearing what the target holds that the
        source no longer does; also the number of changes that made."""
        changed = 0
        at_target = {r.id for r in await every_record(target, node.id)}
        if not mine and at_target:
            # Nothing of this migration is there yet, so these were left by an earlier migration away
            # from this provider: a stale copy whose old ids would shadow the aliases. Cleared first.
            await target.call(_drop(node.id), read=False)
            mem.dropped_leftovers += len(at_target)
            at_target = set()
        current = await every_record(source, node.id)
        listed = {r.id for r in current}
        gone = [old for old in mine if old not in listed]
        if gone:
            erase = [mine[old].new_id for old in gone if mine[old].new_id in at_target]
            if erase:
                await target.call(_erase(node.id, erase), read=False)
            await self.log.dropped(report.id, node.id, gone)
            mem.erased += len(gone)
            changed += len(gone)
        node_items = await gather([self._item(node, source, target, record, mine.get(record.id), at_target)
                                   for record in current])
        orphans = at_target - {c.new_id for old, c in mine.items() if old in listed}
        if orphans:
            changed += await self._adopt(report, node, target, sorted(orphans), node_items)
        return changed, node_items

    async def _write(self, report: MigrationReport, target: ProviderHandle, items: list[Item]) -> int:
        """Replays what the target lacks, noting each version in the log as it lands; versions written."""
        todo = sum(1 for i in items if i.done < len(i.versions))
        finished = 0
        self.progress(0, todo)

        async def after_version(item: Item, version: Record) -> None:
            await self.log.note(report.id, item.memory_id, item.key[1], item.new_id or "", version.version)

        async def after_record(item: Item, version: Record) -> None:
            nonlocal finished
            finished += 1
            self.progress(finished, todo)

        outcome = await Replay(target, items, after_version=after_version, after_record=after_record).run()
        report.versions_written += outcome.versions_written
        report.degraded.extend(d for d in outcome.degraded if d not in report.degraded)
        return outcome.versions_written

    async def _item(self, node: MemoryNode, source: ProviderHandle, target: ProviderHandle, record: Record,
                    copied: Copied | None, at_target: set[str]) -> Item:
        key = (node.id, record.id)
        there = copied is not None and copied.new_id in at_target
        if copied is not None and there and copied.source_version >= record.version:
            # Done in an earlier pass or run: no history to read. Kept as an item so that references
            # to it from records still to be copied are rewritten to its id at the target.
            return Item(key, node.id, (), copied.new_id, 0)
        item = Item(key, node.id, await history(source, node.id, record.id))
        if copied is not None and there:
            # The target is the truth about what a previous attempt wrote, not the log: a call can
            # fail after the target stored what it was sent.
            held = await versions_at(target, node.id, copied.new_id)
            if held is not None:
                item.new_id, item.done = copied.new_id, min(held, len(item.versions))
        return item

    async def _adopt(self, report: MigrationReport, node: MemoryNode, target: ProviderHandle, orphans: list[str],
                     items: list[Item]) -> int:
        """Copies at the target that the log does not know: a first version stored by a call that then
        failed. One that matches a record still to copy is taken over; any other is erased."""
        waiting: dict[tuple[Any, ...], list[Item]] = {}
        for item in items:
            if item.new_id is None and item.versions:
                waiting.setdefault(_fingerprint(item.versions[0]), []).append(item)
        strays = []
        mem = next(m for m in report.memories if m.id == node.id)
        for orphan in orphans:
            try:
                held = await history(target, node.id, orphan)
            except RecordNotFound:
                continue
            same = waiting.get(_fingerprint(held[0]), []) if held else []
            match = same.pop(0) if same else None
            if match is None:
                strays.append(orphan)
                continue
            match.new_id, match.done = orphan, min(len(held), len(match.versions))
            await self.log.note(report.id, node.id, match.key[1], orphan, match.versions[match.done - 1].version)
            mem.adopted += 1
        if strays:
            await target.call(_erase(node.id, strays), read=False)
            mem.erased += len(strays)
        return len(strays)

    async def _switch(self, report: MigrationReport, scope: list[tuple[MemoryNode, ProviderHandle]]) -> None:
        copied = await self.log.copied(report.id)
        tree = self.services.store.tree
        by_memory = {m.id: m for m in report.memories}
        for node, _ in scope:
            if not tree.exists(node.id):
                continue  # deleted while it was copied: nothing to bind
            pairs = [(old, c.new_id) for (memory_id, old), c in copied.items() if memory_id == node.id]
            await self.log.switch(node.id, self.to, pairs)
            by_memory[node.id].switched = True
            log.info("memory %s now on provider %s (%d records, %d aliases)", node.id, self.to,
                     by_memory[node.id].records, len(pairs))
        if not self.purge_source:
            return
        for node, source in scope:
            if not by_memory[node.id].switched:
                continue
            try:
                await source.call(_drop(node.id), read=False)
            except ProviderError as exc:
                # The migration is complete; the copy left on the source is said, with why.
                report.degraded.append(entries.memory_entry(node.id, "source_copy", f"not_dropped_{exc.reason}"))
                continue
            by_memory[node.id].purged_source = True
        report.source_kept = not all(m.purged_source for m in report.memories)


def _drop(memory_id: str) -> Callable[[Provider], Awaitable[None]]:
    def drop(provider: Provider) -> Awaitable[None]:
        return provider.drop_memory(memory_id)

    return drop


def _erase(memory_id: str, record_ids: list[str]) -> Callable[[Provider], Awaitable[Erasure]]:
    def erase(provider: Provider) -> Awaitable[Erasure]:
        return provider.erase(memory_id, record_ids)

    return erase


def _as_copy_error(exc: Exception) -> CopyError:
    if isinstance(exc, CopyError):
        return exc
    if isinstance(exc, Unsupported):  # the provider cannot do it at all (a memory it cannot list whole)
        return CopyError.of_provider(None, exc, f"{exc}. The binding is unchanged.")
    if isinstance(exc, ProviderError):
        return CopyError.of_provider(None, exc, f"A provider failed while copying ({exc.reason}): {exc}. The "
                                     "binding is unchanged; run the migration again to resume.")
    if isinstance(exc, RecordNotFound):
        return CopyError("memory_unavailable", "A record vanished while it was copied. The binding is unchanged; "
                         "run the migration again to resume.", {"reason": "record_vanished"})
    log.exception("migration failed unexpectedly", exc_info=exc)
    return CopyError("memory_unavailable", "The migration failed; the error is logged. The binding is unchanged; "
                     "run the migration again to resume.", {"reason": "internal"})
