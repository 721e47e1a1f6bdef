"""Replaying records, version by version, into a provider: the engine under import and migration.

A provider mints a record's id when it is first written, so a record copied elsewhere gets a new id,
and a reference to it from another copied record must be rewritten to that id. Versions are therefore
written in the order they were first written (by `written_at`), across all records of the job: a
record is referenced only once it exists, so its copy exists before the version that names it, and a
reference is rewritten as it is written. History stays exactly as it was, with no extra version that
a "fix the references afterwards" pass would append. A version that names a record of the job not yet
written (only possible when times disagree with the order things happened in, as in a hand-made file)
waits for it; if nothing is left but such waits, the earliest goes ahead with the old id, which still
resolves through the alias table, and the report says so.

Each version is written with its original writer and time: `NewRecord` and `Revision` carry both,
and a forgotten version is replayed with `forget(by, at)`; a version that lost its title or a validity
time is replayed as a revision that clears it. What the contract cannot express is said in `degraded`,
never dropped in silence.
"""

from __future__ import annotations

import asyncio
import fnmatch
import heapq
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from adapters import degraded as entries
from adapters.base import NewRecord, Page, Provider, ProviderError, Record, RecordNotFound, Reference, Revision
from gateway.federation.failures import failure_for
from gateway.federation.providers import ProviderHandle

T = TypeVar("T")
Key = tuple[str | None, str]  # (the memory the record was read from, or None when unknown; its old id)


@dataclass
class Item:
    """One record to write into `memory_id` at the target. `new_id`/`done` say what a previous run
    already wrote there: the id it has, and how many of `versions` it holds."""

    key: Key
    memory_id: str
    versions: tuple[Record, ...]
    new_id: str | None = None
    done: int = 0


Hook = Callable[[Item, Record], Awaitable[None]]


async def _no_hook(item: Item, version: Record) -> None:
    return None


@dataclass
class Outcome:
    versions_written: int = 0
    records_written: int = 0
    degraded: list[str] = field(default_factory=list)


class Replay:
    """Write `items` into `target`. `after_version` runs after each version is written (the caller
    records progress there, so a rerun goes on from it); `after_record` after a record's last one."""

    def __init__(self, target: ProviderHandle, items: Sequence[Item], *, after_version: Hook = _no_hook,
                 after_record: Hook = _no_hook) -> None:
        self.target = target
        self.items = list(items)
        self.after_version = after_version
        self.after_record = after_record
        self.outcome = Outcome()
        self._by_key = {item.key: item for item in self.items}
        self._position = {item.key: index for index, item in enumerate(self.items)}
        self._by_old_id = {item.key[1]: item for item in self.items if item.key[0] is None}

    def _in_job(self, ref: Reference) -> Item | None:
        return self._by_key.get((ref.memory_id, ref.record_id)) or self._by_old_id.get(ref.record_id)

    def _references(self, item: Item, version: Record) -> tuple[Reference, ...]:
        out = []
        for ref in version.references:
            named = self._in_job(ref)
            if named is not None and named.new_id is not None:
                out.append(Reference(named.memory_id, named.new_id, ref.rel))
            else:
                if named is not None:
                    # Written before the record it names existed here: it keeps the old id, which
                    # resolves through the alias.
                    self.outcome.degraded.append(entries.record_entry(item.key[1], "reference", "kept_old_id"))
                out.append(ref)
        return tuple(out)

    def _waits_for(self, item: Item, version: Record) -> Item | None:
        for ref in version.references:
            named = self._in_job(ref)
            if named is not None and named.new_id is None and named is not item:
                return named
        return None

    async def run(self) -> Outcome:
        # Heap of (time of the next version to write, order, item index, forced). The order keeps the
        # replay deterministic when times are equal: a file's order, then version order.
        heap: list[tuple[datetime, int, int, bool]] = []
        waiting: dict[int, list[tuple[datetime, int, int, bool]]] = {}
        for index, item in enumerate(self.items):
            if item.done < len(item.versions):
                heapq.heappush(heap, (_when(item.versions[item.done]), index, index, False))
        while heap or waiting:
            if not heap:
                # Only waits are left: they wait on each other. Let the earliest go with the old id.
                entries = sorted(entry for entries in waiting.values() for entry in entries)
                first = entries[0]
                waiting = {k: [e for e in v if e != first] for k, v in waiting.items()}
                waiting = {k: v for k, v in waiting.items() if v}
                heapq.heappush(heap, (first[0], first[1], first[2], True))
            entry = heapq.heappop(heap)
            _, order, index, forced = entry
            item = self.items[index]
            version = item.versions[item.done]
            blocker = None if forced else self._waits_for(item, version)
            if blocker is not None:
                waiting.setdefault(self._position[blocker.key], []).append(entry)
                continue
            created = item.new_id is None
            await self._write(item, version)
            if created:
                for released in waiting.pop(index, []):
                    heapq.heappush(heap, released)
            if item.done < len(item.versions):
                heapq.heappush(heap, (_when(item.versions[item.done]), order, index, False))
            else:
                self.outcome.records_written += 1
                await self.after_record(item, version)
        return self.outcome

    async def _write(self, item: Item, version: Record) -> None:
        refs = self._references(item, version)
        memory_id = item.memory_id
        if item.new_id is None:
            new = NewRecord(
                type=version.type, content=version.content, written_by=version.written_by,
                written_at=version.time.written_at, title=version.title, attributes=version.attributes,
                references=refs, valid_from=version.time.valid_from, valid_to=version.time.valid_to,
            )
            first = await self.target.call(lambda p: p.remember(memory_id, new), read=False)
            item.new_id = first.id
        elif version.status == "forgotten":
            record_id = item.new_id
            await self.target.call(
                lambda p: p.forget(memory_id, record_id, version.written_by, version.time.written_at), read=False)
        else:
            record_id = item.new_id
            revision = Revision(
                written_by=version.written_by, written_at=version.time.written_at, type=version.type,
                title=version.title, content=version.content, attributes=version.attributes, references=refs,
                valid_from=version.time.valid_from, valid_to=version.time.valid_to,
                clear=_cleared(item.versions[item.done - 1], version),
            )
            await self.target.call(lambda p: p.revise(memory_id, record_id, revision), read=False)
        item.done += 1
        self.outcome.versions_written += 1
        await self.after_version(item, version)


def _cleared(before: Record, version: Record) -> frozenset[str]:
    """The fields a version lost against the one before it: its revision must clear them, not keep them."""
    return frozenset(name for name, was, now in (
        ("title", before.title, version.title),
        ("valid_from", before.time.valid_from, version.time.valid_from),
        ("valid_to", before.time.valid_to, version.time.valid_to),
    ) if was is not None and now is None)


def _when(version: Record) -> datetime:
    moment = version.time.written_at
    # Providers answer aware times; a naive one is UTC, and the two must not meet in one comparison.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def versions_at(target: ProviderHandle, memory_id: str, record_id: str) -> int | None:
    """How many versions the target holds of a record a previous run wrote; None if it is gone."""
    try:
        history = await target.call(lambda p: p.history(memory_id, record_id), read=True)
    except RecordNotFound:
        return None
    return len(history)


# --------------------------------------------------------------------------- reading and checking


PAGE = 100


class CopyError(Exception):
    """A copy that cannot go on, as the chapter's error `code` (memory_unsupported, memory_busy, ...)."""

    def __init__(self, code: str, message: str, detail: dict[str, Any] | None = None, *, status: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail or {}
        self.status = status  # None: the status of `code`; set where the provider error map chose it
        self.headers = headers or {}

    @classmethod
    def of_provider(cls, provider: str | None, exc: ProviderError, message: str,
                    detail: dict[str, Any] | None = None) -> CopyError:
        """A provider's failure during a copy, answered as every route answers it (federation.failures): its
        code, status, reason and Retry-After, with the copy's own message. `provider` None: not known which
        of the two providers of a migration failed."""
        failure = failure_for(provider or "", exc)
        found = {k: v for k, v in (failure.detail or {}).items() if k != "provider" or provider is not None}
        return cls(failure.code, message, {"reason": exc.reason, **found, **(detail or {})}, status=failure.status,
                   headers=failure.headers)


async def every_record(source: ProviderHandle, memory_id: str) -> list[Record]:
    """The current version of every record of the memory, forgotten ones included, across all pages."""
    out: list[Record] = []
    cursor: str | None = None
    while True:
        page = await source.call(partial(list_page, memory_id, cursor), read=True)
        out.extend(page.items)
        if page.next is None:
            return out
        cursor = page.next


def list_page(memory_id: str, cursor: str | None, provider: Provider) -> Awaitable[Page]:
    return provider.list(memory_id, include="all", cursor=cursor, limit=PAGE)


async def gather(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Run the calls concurrently (the provider's handle bounds how many reach it at once); the first
    failure cancels the rest and is raised as itself, not wrapped in an ExceptionGroup."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_awaited(call)) for call in calls]
    except ExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]


async def _awaited(call: Awaitable[T]) -> T:
    return await call


async def history(source: ProviderHandle, memory_id: str, record_id: str) -> tuple[Record, ...]:
    return tuple(await source.call(lambda p: p.history(memory_id, record_id), read=True))


def check_target(target: ProviderHandle, items: Sequence[Item]) -> None:
    """Refuse before writing anything what the target could not keep whole (§10.2: never approximate
    in silence): a file of a media type it does not keep, versions it would not keep, revise or forget
    it cannot do, a record that follows a source (only that source's owner may write one)."""
    caps = target.capabilities()
    for item in items:
        if item.done >= len(item.versions):
            continue
        rid = item.key[1]
        for version in item.versions:
            if version.follows is not None:
                raise CopyError("memory_unsupported", f"record {rid} follows {version.follows.kind} "
                                f"{version.follows.name!r}; it is copied by that source's owner, not by a copy")
            for part in version.content:
                media = part.file.media_type.split(";")[0].strip().lower() if part.file else None
                if media and not any(fnmatch.fnmatch(media, pattern) for pattern in caps.media):
                    raise CopyError("memory_unsupported", f"record {rid}: provider {target.name} does not keep "
                                    f"{media} files", {"record_id": rid, "media_type": media})
        later = item.versions[1:]
        if later and caps.history_content != "versions":
            raise CopyError("memory_unsupported", f"record {rid} has {len(item.versions)} versions and provider "
                            f"{target.name} keeps {caps.history_content} of history", {"record_id": rid})
        if any(v.status != "forgotten" for v in later) and caps.revise == "false":
            raise CopyError("memory_unsupported", f"record {rid} was revised and provider {target.name} cannot "
                            "revise", {"record_id": rid})
        if any(v.status == "forgotten" for v in later) and caps.forget == "false":
            raise CopyError("memory_unsupported", f"record {rid} was forgotten and provider {target.name} cannot "
                            "forget", {"record_id": rid})
