"""The embedded provider's consolidation pass (§9.2): merge duplicate facts, forget what has expired.

One run reads the memory's active records oldest first (by the `written_at` of their current version,
then id) after the point the previous run stopped at, and for each one it reads:

- **expired**: a record whose `time.valid_to` is at or before the run's now is forgotten. Episodes are
  left alone (raw experience is append-only, §4.1), and so are records that follow a source (§5.4).
- **duplicate fact**: a fact whose statement, normalized (case folded, every run of punctuation and
  whitespace one space), equals that of an older active fact (older: its first version was written
  earlier), is forgotten, and the older one is kept.
  Keeping the oldest rather than writing a new merged record keeps the id that references already
  point at. Attributes and references only the duplicate carried are added to the kept fact in a new
  version (the kept fact's own values win), so merging loses nothing that was stated. A fact's
  statement is its text parts, or its title when it has none.

The budget counts records read (unit "records"); nothing here calls a model, so usage reports zero
tokens. A run that reaches its budget with records left stops (`stopped`, `exhausted`), and reports
through the `written_at` of the last record it read; it never stops between two records written at the
same instant, since a resume after that instant would skip the second, so it may read a few more than
its budget. Every change goes through the provider's public writes, stamped with the run's writer.
Members may write while a run runs: a record that changed after the run listed it is left for the next
run rather than acted on as it no longer is.

A record that a revert brought back (its current version written by a provider over a version a
provider forgot) is left as it is: the revert said to keep it, and a later run must not undo that.
Once a member writes to it again, it is read like any other record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from adapters.base import Provider, ProviderRejected, Record, RecordNotFound, Revision, Writer
from adapters.consolidation import Change, ChangeKind, ChangeSink, Reversal, RunOutcome, RunRead
from adapters.local import _sql as sql

UNIT = "records"
_PAGE = 200
_SEPARATORS = re.compile(r"[\W_]+")


def statement(record: Record) -> str:
    """A fact's normalized statement: '' when it says nothing (such facts are never merged)."""
    text = " ".join(p.text for p in record.content if p.type == "text" and p.text)
    return _SEPARATORS.sub(" ", (text or record.title or "").casefold()).strip()


def expired(record: Record, at: datetime) -> bool:
    valid_to = record.time.valid_to
    return valid_to is not None and sql.utc(valid_to) <= sql.utc(at)


def _expirable(record: Record) -> bool:
    return record.type != "episode" and record.follows is None


async def _active_oldest_first(provider: Provider, memory_id: str) -> list[Record]:
    found: list[Record] = []
    cursor: str | None = None
    while True:
        page = await provider.list(memory_id, include="active", cursor=cursor, limit=_PAGE)
        found.extend(page.items)
        if page.next is None:
            break
        cursor = page.next
    found.sort(key=lambda r: (sql.utc(r.time.written_at), r.id))
    return found


async def revived_by_revert(provider: Provider, memory_id: str, record: Record) -> bool:
    if record.written_by.kind != "provider" or record.supersedes is None:
        return False
    prior = next((v for v in await provider.history(memory_id, record.id) if v.version == record.supersedes),
                 None)
    return prior is not None and prior.status == "forgotten" and prior.written_by.kind == "provider"


class _Pass:
    """The state of one run: which fact is kept for each statement, and what was changed."""

    def __init__(self, provider: Provider, memory_id: str, by: Writer, at: datetime,
                 on_change: ChangeSink | None) -> None:
        self.provider, self.memory_id, self.by, self.at = provider, memory_id, by, at
        self.on_change = on_change
        self.changes: list[Change] = []
        self.kept: dict[str, list[Record]] = {}  # statement -> its active, unexpired facts, oldest first

    async def index(self, records: Sequence[Record]) -> None:
        for record in records:
            key = statement(record) if record.type == "fact" else ""
            if key and not expired(record, self.at):
                self.kept.setdefault(key, []).append(record)
        # Oldest means first written, not last revised: a revision (a revert's, say) must not turn the
        # kept fact into the duplicate. Only facts that have a twin pay for reading their history.
        for twins in self.kept.values():
            if len(twins) > 1:
                created = {r.id: (await self.provider.history(self.memory_id, r.id))[0].time.written_at
                           for r in twins}
                twins.sort(key=lambda r: (sql.utc(created[r.id]), r.id))

    def _note(self, record_id: str, kind: ChangeKind, version: int) -> None:
        change = Change(record_id, kind, version)
        self.changes.append(change)
        if self.on_change is not None:
            self.on_change(change)

    async def _unchanged(self, record: Record) -> bool:
        """Whether the record is still as the run listed it. Members write while a run runs; a record
        they changed meanwhile is left for the next run rather than acted on as it no longer is."""
        try:
            current = await self.provider.get(self.memory_id, record.id)
        except RecordNotFound:
            return False
        return current.version == record.version and current.status == record.status

    async def read(self, record: Record) -> None:
        if _expirable(record) and expired(record, self.at):
            if not await revived_by_revert(self.provider, self.memory_id, record) and await self._unchanged(record):
                await self._forget(record)
            return
        key = statement(record) if record.type == "fact" else ""
        twins = self.kept.get(key, [])
        if not twins or twins[0].id == record.id:
            return
        if await revived_by_revert(self.provider, self.memory_id, record):
            return
        if await self._unchanged(record) and await self._unchanged(twins[0]):
            await self._merge_into(twins, record)

    async def _forget(self, record: Record) -> None:
        tombstone = await self.provider.forget(self.memory_id, record.id, self.by, self.at)
        self._note(record.id, "forgotten", tombstone.version)
        for twins in self.kept.values():
            twins[:] = [r for r in twins if r.id != record.id]

    async def _merge_into(self, twins: list[Record], duplicate: Record) -> None:
        keeper = twins[0]
        attributes = {**duplicate.attributes, **keeper.attributes}
        references = keeper.references + tuple(r for r in duplicate.references if r not in keeper.references)
        if attributes != dict(keeper.attributes) or references != keeper.references:
            revision = Revision(written_by=self.by, written_at=self.at, attributes=attributes, references=references)
            twins[0] = await self.provider.revise(self.memory_id, keeper.id, revision)
            self._note(keeper.id, "superseded", twins[0].version)
        await self._forget(duplicate)


async def consolidate(provider: Provider, memory_id: str, *, budget: int | None, resume_after: datetime | None,
                      by: Writer, at: datetime, on_change: ChangeSink | None = None) -> RunOutcome:
    """One pass; see the module's docstring for what it reads, changes and how the budget stops it."""
    if budget is not None and budget < 1:
        raise ProviderRejected("a budget is at least 1 record")
    records = await _active_oldest_first(provider, memory_id)
    run = _Pass(provider, memory_id, by, at, on_change)
    await run.index(records)
    after = sql.utc(resume_after) if resume_after is not None else None
    todo = [r for r in records if after is None or sql.utc(r.time.written_at) > after]
    count, through, exhausted = 0, after, False
    for record in todo:
        written_at = sql.utc(record.time.written_at)
        if budget is not None and count >= budget and written_at != through:
            exhausted = True
            break
        count, through = count + 1, written_at
        await run.read(record)
    return RunOutcome(
        status="stopped" if exhausted else "completed",
        read=RunRead(count=count, through=through, unit=UNIT),
        changes=tuple(run.changes),
        budget_exhausted=exhausted,
        usage={"input_tokens": 0, "output_tokens": 0, "records_read": count},
    )


async def revert(provider: Provider, memory_id: str, changes: Sequence[Change], *, by: Writer,
                 at: datetime) -> Reversal:
    """Undo a run's changes, last first, by appending. A record whose current version is no longer the
    one the run wrote (revised, forgotten or erased since) is skipped and reported."""
    done: list[Change] = []
    skipped: list[str] = []
    for change in reversed(changes):
        try:
            current = await provider.get(memory_id, change.record_id)
        except RecordNotFound:
            skipped.append(change.record_id)
            continue
        if current.version != change.version:
            skipped.append(change.record_id)
            continue
        if change.kind == "created":
            tombstone = await provider.forget(memory_id, current.id, by, at)
            done.append(Change(current.id, "forgotten", tombstone.version))
            continue
        versions = await provider.history(memory_id, current.id)
        prior = next((v for v in versions if v.version == current.supersedes), None)
        if prior is None:
            skipped.append(change.record_id)
            continue
        if prior.status == "forgotten":  # undoing a revert that brought a record back: forget it again
            tombstone = await provider.forget(memory_id, current.id, by, at)
            done.append(Change(current.id, "forgotten", tombstone.version))
            continue
        # Every field of the version before the run's, so the record reads as it did. (A field the run set
        # where there was none cannot be cleared by a revision; this pass never does that.)
        restored = await provider.revise(memory_id, current.id, Revision(
            written_by=by, written_at=at, type=prior.type, title=prior.title, content=prior.content,
            attributes=prior.attributes, references=prior.references, valid_from=prior.time.valid_from,
            valid_to=prior.time.valid_to,
        ))
        done.append(Change(current.id, "superseded", restored.version))
    return Reversal(changes=tuple(done), skipped=tuple(dict.fromkeys(skipped)))
