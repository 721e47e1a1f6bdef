"""Moving a memory's records between providers: export, import, and the provider swap.

Pure logic on top of the providers and the state store; the HTTP routes (gateway/api/migration.py)
and the operator commands (gateway/cli/migrate.py) are thin over it.

- `export_memory` yields one line per record, every version included, forgotten records too.
- `import_records` validates a whole file first (a bad line writes nothing), then replays each
  record's versions into the memory's provider with their original writers and times, and records
  old id -> new id in the alias table so the old ids keep resolving through the memory.
- `migrate` copies a memory (or its subtree) to another provider and switches the binding; see
  `gateway.migration._swap` for the order of steps that makes it safe to stop and rerun.

References between records of one import are rewritten to the new ids as they are written (records
are replayed in the order they were first written, so a referenced record exists before what names
it); see `gateway.migration._replay`. One job that writes (an import or a migration) runs on a memory at a
time in this process; a second is refused as busy.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from adapters.base import ProviderError, Record, RecordNotFound
from gateway.migration._log import MigrationLog
from gateway.migration._replay import CopyError, Item, Replay, check_target, gather, history, list_page, versions_at
from gateway.migration._swap import MigrationReport, Progress, Swap
from gateway.migration.export_format import Exported, LineError, line_json, parse_lines
from gateway.state import schema as t

if TYPE_CHECKING:
    from gateway.services import Services

__all__ = [
    "CopyError", "ImportReport", "LineError", "MigrationReport", "export_memory", "import_records", "migrate",
]

# Memories with a job running in this process, per services object: a second job on one of them is
# refused (memory_busy) rather than interleaved with the first.
_RUNNING: dict[int, set[str]] = {}


@contextlib.contextmanager
def _exclusive(services: Services, memory_ids: Iterable[str]) -> Iterator[None]:
    held = _RUNNING.setdefault(id(services), set())
    wanted = set(memory_ids)
    if held & wanted:
        raise CopyError("memory_busy", "An import or a migration is already running on this memory.")
    held |= wanted
    try:
        yield
    finally:
        held -= wanted
        if not held:
            _RUNNING.pop(id(services), None)


def _node_and_handle(services: Services, memory_id: str) -> tuple[Any, Any]:
    node = services.store.tree.get(memory_id)
    if node is None:
        raise CopyError("memory_not_found", "No such memory.")
    handle = services.providers.get(node.provider)
    if handle is None:
        raise CopyError("memory_unavailable", f"The memory's provider {node.provider!r} is not connected.",
                        {"provider": node.provider, "reason": "not_connected"})
    return node, handle


# --------------------------------------------------------------------------- export


async def export_memory(services: Services, memory_id: str) -> AsyncIterator[dict[str, Any]]:
    """One JSON-able dict per record of the memory (forgotten ones too), newest record first, each
    with every version oldest first. Reads the provider a page at a time."""
    _, handle = _node_and_handle(services, memory_id)
    cursor: str | None = None
    while True:
        page = await handle.call(partial(list_page, memory_id, cursor), read=True)
        versions = await gather([history(handle, memory_id, record.id) for record in page.items])
        for record, chain in zip(page.items, versions, strict=True):
            yield line_json(memory_id, record.id, chain)
        if page.next is None:
            return
        cursor = page.next


# --------------------------------------------------------------------------- import


@dataclass
class ImportReport:
    memory_id: str
    imported: int = 0  # records written (or finished) by this import
    skipped: int = 0  # records an earlier import of the same lines had already written whole
    aliases: int = 0  # old ids that now resolve through the memory
    versions_written: int = 0
    degraded: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {"object": "memory.import", **asdict(self)}


async def _check_files(services: Services, exported: list[Exported]) -> None:
    """A file part names a file in this gateway's store; one it does not hold would be a dangling part."""
    known: set[str] = set()
    for record in exported:
        for version in record.versions:
            for part in version.content:
                if part.file is None or part.file.id in known:
                    continue
                if await services.files.get(part.file.id) is None:
                    raise LineError(record.line, f"version {version.version} names file {part.file.id}, "
                                    "which this gateway does not hold (upload it first)")
                known.add(part.file.id)


def _file_ids(items: Iterable[Item]) -> set[str]:
    return {p.file.id for item in items for v in item.versions for p in v.content if p.file is not None}


async def import_records(services: Services, memory_id: str, lines: Iterable[str | bytes]) -> ImportReport:
    """Validate every line, then write each record with all its versions into the memory.

    Rerunning the same lines resumes: a record whose old id already has an alias in this memory is
    skipped if the target holds all its versions, and finished if it holds some.
    """
    node, handle = _node_and_handle(services, memory_id)
    exported = parse_lines(lines)
    await _check_files(services, exported)
    report = ImportReport(memory_id)
    with _exclusive(services, [memory_id]):
        aliases = {row.old_id: row.new_id for row in await services.store.rows.fetch_all(t.record_aliases,
                                                                                    memory_id=memory_id)}
        items = []
        for record in exported:
            item = Item((record.memory_id, record.id), node.id, record.versions)
            known = aliases.get(record.id)
            held = await versions_at(handle, node.id, known) if known else None
            if known is not None and held is not None:
                item.new_id, item.done = known, min(held, len(record.versions))
                if item.done == len(record.versions):
                    report.skipped += 1
            items.append(item)
        check_target(handle, items)
        state = MigrationLog(services.store)

        # The files the lines name are held while their records are written, and counted as the copies'
        # (an erasure of the originals must leave their bytes). One pin per memory: a rerun lifts it.
        pin = await services.files.pin(node.id, _file_ids(items), token=f"import-{node.id}")

        async def after_version(item: Item, version: Record) -> None:
            if item.new_id is not None and aliases.get(item.key[1]) != item.new_id:
                # Written as soon as the record exists, so a rerun after a failure finds it.
                await state.add_aliases(node.id, [(item.key[1], item.new_id)])
                aliases[item.key[1]] = item.new_id
                report.aliases += 1
            if item.new_id is not None:
                await services.files.attach(node.id, item.new_id, _file_ids([item]))

        try:
            outcome = await Replay(handle, items, after_version=after_version).run()
            for item in items:  # records a previous run wrote whole are skipped by the replay
                if item.new_id is not None:
                    await services.files.attach(node.id, item.new_id, _file_ids([item]))
            await services.files.unpin(node.id, pin)
        except ProviderError as exc:
            raise CopyError.of_provider(
                node.provider, exc, f"The memory's provider failed during the import ({exc.reason}); what was "
                "written is kept and the same lines can be imported again to finish.",
                {"import": report.document()}) from exc
        except RecordNotFound as exc:
            raise CopyError("memory_unavailable", "The memory's provider failed during the import "
                            "(record_vanished); what was written is kept and the same lines can be imported again "
                            "to finish.", {"provider": node.provider, "reason": "record_vanished",
                                           "import": report.document()}) from exc
    report.imported = outcome.records_written
    report.versions_written = outcome.versions_written
    report.degraded = outcome.degraded
    return report


# --------------------------------------------------------------------------- migration


async def migrate(services: Services, memory_id: str, to: str, *, recursive: bool = False, purge_source: bool = False,
                  progress: Progress | None = None) -> MigrationReport:
    """Copy the memory (and with `recursive` its subtree) to provider `to`, then switch each binding.

    A failure raises CopyError with the migration's report in `detail["migration"]`; the bindings are
    unchanged and a rerun with the same arguments resumes. Source records are left in place unless
    `purge_source`.
    """
    tree = services.store.tree
    if tree.get(memory_id) is None:
        raise CopyError("memory_not_found", "No such memory.")
    scope = tree.subtree(memory_id) if recursive else [memory_id]
    with _exclusive(services, scope):
        return await Swap(services, memory_id, to, recursive=recursive, purge_source=purge_source,
                          progress=progress).run()

