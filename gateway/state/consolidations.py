"""Consolidation runs (§9.2) and the changes each wrote, as the gateway keeps them.

Tables: gateway/state/consolidation_schema.py. The route decides when a run may start and what it
reports; this module reads and writes the rows, each step in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from adapters.consolidation import CHANGE_KINDS, ChangeKind
from gateway.state.consolidation_schema import consolidation_changes as changes_t
from gateway.state.consolidation_schema import consolidation_runs as runs_t

UNFINISHED = ("queued", "running")


@dataclass(frozen=True)
class Run:
    """One run's row. `read`, `changes`, `budget` and `usage` are JSON text in the §9.2 shape."""

    id: str
    memory_id: str
    provider: str
    status: str  # queued | running | completed | stopped | failed
    trigger: str  # manual | schedule
    started_at: int  # ms since the epoch
    finished_at: int | None
    read: str
    changes: str
    budget: str
    usage: str
    resumed_after: str | None
    reverts: str | None  # the run this one undid
    reverted_by: str | None  # the run that undid this one
    created_by: str  # a principal
    error: str


@dataclass(frozen=True)
class Written:
    """One version a run wrote, in the order it wrote them (`seq`)."""

    run_id: str
    seq: int
    record_id: str
    kind: ChangeKind
    version: int
    reverted: bool


def _run(row: Any) -> Run:
    return Run(**row._mapping)


def _written(row: Any) -> Written:
    return Written(row.run_id, row.seq, row.record_id, _kind(row.kind), row.version, bool(row.reverted))


def _kind(stored: str) -> ChangeKind:
    # The column holds only what `finish` wrote from a Change; anything else is a damaged row, said so.
    for kind in CHANGE_KINDS:
        if kind == stored:
            return kind
    raise ValueError(f"a consolidation change of unknown kind {stored!r}")


class Busy(Exception):
    """Another run (of another process, still within its time) holds the memory."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class ConsolidationRuns:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def begin(self, run: Run, *, stale_before: int, interrupted: str) -> Run:
        """Write `run` (started no earlier than just after the memory's last run, so newest first means
        started last) once no other run holds its memory: a running row started after `stale_before`
        raises Busy, an older one belongs to a process that died and is failed with `interrupted`."""
        async with self.engine.begin() as conn:
            for row in await conn.execute(select(runs_t).where(runs_t.c.memory_id == run.memory_id,
                                                               runs_t.c.status.in_(UNFINISHED))):
                if row.started_at > stale_before:
                    raise Busy(row.id)
                await conn.execute(update(runs_t).where(runs_t.c.id == row.id).values(
                    status="failed", finished_at=run.started_at, error=interrupted))
            last = await self._newest(conn, runs_t.c.memory_id == run.memory_id)
            started = max(run.started_at, last.started_at + 1) if last is not None else run.started_at
            values = {**run.__dict__, "started_at": started}
            await conn.execute(runs_t.insert().values(**values))
        return Run(**values)

    async def get(self, memory_id: str, run_id: str) -> Run | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(runs_t).where(runs_t.c.id == run_id,
                                                           runs_t.c.memory_id == memory_id))).first()
        return _run(row) if row is not None else None

    async def last_finished(self, memory_id: str) -> Run | None:
        """The memory's newest completed or stopped run that is not a revert."""
        async with self.engine.connect() as conn:
            return await self._newest(conn, runs_t.c.memory_id == memory_id, runs_t.c.reverts.is_(None),
                                      runs_t.c.status.in_(("completed", "stopped")))

    async def page(self, memory_id: str, before: tuple[int, str] | None, limit: int) -> list[Run]:
        """Newest first, those strictly older than `before` (started_at, id), at most `limit`."""
        where = [runs_t.c.memory_id == memory_id]
        if before is not None:
            stamp, run_id = before
            where.append(or_(runs_t.c.started_at < stamp, and_(runs_t.c.started_at == stamp, runs_t.c.id < run_id)))
        query = select(runs_t).where(*where).order_by(runs_t.c.started_at.desc(), runs_t.c.id.desc()).limit(limit)
        async with self.engine.connect() as conn:
            return [_run(row) for row in await conn.execute(query)]

    async def finish(self, run_id: str, written: Sequence[tuple[str, str, int]], *, at: int, changes: str,
                     **values: str) -> None:
        """Close the run: its written (record id, kind, version) in order, its summary and outcome at once."""
        async with self.engine.begin() as conn:
            if written:
                await conn.execute(changes_t.insert(), [
                    {"run_id": run_id, "seq": i, "record_id": record_id, "kind": kind, "version": version,
                     "reverted": False} for i, (record_id, kind, version) in enumerate(written)])
            await conn.execute(update(runs_t).where(runs_t.c.id == run_id).values(
                finished_at=at, changes=changes, **values))

    async def written(self, run_id: str, *, after: int = -1, limit: int | None = None,
                      unreverted: bool = False) -> list[Written]:
        """What the run wrote, in order, from just after `seq` `after`; only what no revert undid if asked."""
        query = select(changes_t).where(changes_t.c.run_id == run_id, changes_t.c.seq > after)
        if unreverted:
            query = query.where(changes_t.c.reverted.is_(False))
        query = query.order_by(changes_t.c.seq)
        if limit is not None:
            query = query.limit(limit)
        async with self.engine.connect() as conn:
            return [_written(row) for row in await conn.execute(query)]

    async def mark_reverted(self, run_id: str, record_ids: Sequence[str], revert_id: str) -> None:
        """The revert `revert_id` undid these records of the run: both facts in one transaction."""
        async with self.engine.begin() as conn:
            await conn.execute(update(changes_t).where(changes_t.c.run_id == run_id,
                                                       changes_t.c.record_id.in_(record_ids)).values(reverted=True))
            await conn.execute(update(runs_t).where(runs_t.c.id == run_id).values(reverted_by=revert_id))

    @staticmethod
    async def _newest(conn: AsyncConnection, *where: Any) -> Run | None:
        query = select(runs_t).where(*where).order_by(runs_t.c.started_at.desc(), runs_t.c.id.desc()).limit(1)
        row = (await conn.execute(query)).first()
        return _run(row) if row is not None else None
