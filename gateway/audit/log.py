"""The decision log: every access decision, journaled on the request path, chained off it.

`AuditLog.decide` encodes the entry as one line and appends it with one `os.write` to the open journal
segment (O_APPEND): once that returns, the line survives a kill -9 of the gateway (not a power cut: nothing
is fsynced on the request path). A task wakes every `flush_interval` s (sooner when `batch_size` lines wait),
reads the journal from the committed position (gateway.audit.replay), chains the entries
(gateway.audit.store) and inserts them with the new position in one transaction: a crash in between loses
nothing (start() replays from the committed position) and duplicates nothing (the position commits with
the rows).

Under <data_dir>/audit-journal/ (0700, its files 0600): segments `000000000001.log`, ...; `lock` (one
process per journal); `journal-id` (its row in audit_journals); `journal-key` (without a seal key) and
`anchor` (gateway.audit.journal). Every line carries a MAC; one that does not hold is not stored but
noted on the chain as `audit.journal_rejected`. start() checks the stored log is the one this gateway
left (gateway.audit.opening), opens a fresh segment; one past `segment_bytes` is rotated; a segment is
deleted once wholly committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.audit import opening as audit_open
from gateway.audit import query as audit_query
from gateway.audit import replay
from gateway.audit import store as audit_store
from gateway.audit.chain import canonical_json
from gateway.audit.journal import JournalKey, LocalAnchor, journal_id, take_lock
from gateway.audit.lines import (
    REASON_CAP,
    Coverage,
    DecisionEntry,
    coverage_line,
    encoded,
    marker,
)  # fmt: skip
from gateway.audit.query import AuditQuery
from gateway.audit.seal import AuditLogRefused, Seal
from gateway.audit.store import Head, HeadMoved, VerifyReport
from gateway.state.private_files import private_dir
from gateway.telemetry import metrics

__all__ = ["REASON_CAP", "AuditLog", "AuditQuery", "Coverage", "DecisionEntry", "VerifyReport"]

log = logging.getLogger("memfed.audit")

_EARLY_CAP = 100_000  # decisions kept in memory before start()


class AuditLog:
    """The gateway's decision log. `decide` from anywhere; `start` before, `close` after serving."""

    def __init__(self, engine: AsyncEngine, data_dir: Path, *, enabled: bool = True, flush_interval: float = 1.0,
                 batch_size: int = 5000, segment_bytes: int = 64 * 1024 * 1024,
                 seal: Seal | None = None) -> None:  # fmt: skip
        self._engine, self._enabled, self._dir = engine, enabled, Path(data_dir) / "audit-journal"
        self._seal = seal
        self._interval, self._batch_size, self._segment_bytes = flush_interval, max(1, batch_size), segment_bytes
        self._lock = threading.Lock()  # guards _fd, _current, _early: decide may run in worker threads
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._current = self._waiting = 0
        self._closed = self._stopping = False
        self._early: list[bytes] = []  # decisions made before start()
        self._journaled: set[str] = set()  # coverage sets journaled by this process
        self._bodies: LRUCache[str, Any] = LRUCache(maxsize=128)  # decoded coverage sets (≤1000 decisions each)
        self._markers: list[tuple[Any, ...]] = []  # the log's own notes, waiting for the next commit
        self._counts = {"stored": 0, "dropped": 0, "rejected": 0}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self._journal_id = ""
        self._key: JournalKey | None = None
        self._end = 0  # where the current segment ends after this process's last write
        self._sealed_from: int | None = None  # where the stored log is sealed from
        self._head: Head | None = None
        self._pos: tuple[int, int] | None = None  # the committed journal position; None: not started

    @property
    def seal(self) -> Seal | None:
        return self._seal

    @property
    def enabled(self) -> bool:
        """Whether decisions are kept: callers skip building reasons for a log that keeps none."""
        return self._enabled

    def decide(self, entry: DecisionEntry) -> None:
        """Journal one decision: one encode and one `os.write`. Never raises, never waits on the database."""
        self.decide_many((entry,))

    def decide_many(self, entries: Sequence[DecisionEntry]) -> None:
        """Journal several decisions of one request with one `os.write`."""
        self.record([(entry, ()) for entry in entries])

    def decide_plan(self, entry: DecisionEntry, sets: Sequence[Coverage]) -> None:
        """Journal the decisions of a recall's plan: one entry per coverage set, each like `entry` but naming
        its set."""
        if sets:
            self.record([(entry, sets)])

    def record(self, decided: Sequence[tuple[DecisionEntry, Sequence[Coverage]]]) -> None:
        """Journal a request's decisions with one `os.write`: each entry alone, or once per coverage set it
        holds, naming the set. A set this process has not journaled yet goes first, in the same write."""
        if not self._enabled or not decided:
            return
        try:
            lines: list[bytes] = []
            entries = 0
            for entry, sets in decided:
                if not sets:
                    lines.append(encoded(entry))
                    entries += 1
                for coverage in sets:
                    if coverage.digest not in self._journaled:
                        lines.append(coverage_line(coverage))
                    lines.append(encoded(entry, coverage.digest))
                    entries += 1
            self._write(lines, entries)
            if len(self._journaled) > 50_000:
                self._journaled.clear()  # sets are journaled again; the flusher stores each once
            self._journaled.update(c.digest for _, sets in decided for c in sets)
        except Exception:
            self._dropped()

    def _write(self, lines: list[bytes], entries: int) -> None:
        with self._lock:
            if (fd := self._fd) is None or self._key is None:
                if self._closed or len(self._early) >= _EARLY_CAP:
                    raise RuntimeError("the log is closed" if self._closed else "too many decisions before start")
                self._early.extend(lines)
                return
            self._append(fd, self._key, lines)
            before = self._waiting
            self._waiting += entries
            kick = before < self._batch_size <= self._waiting
        if kick and self._loop is not None:  # a full batch waits: wake the flusher (from any thread)
            with contextlib.suppress(RuntimeError):  # the loop has closed: the journal has the line
                self._loop.call_soon_threadsafe(self._wake.set)

    def _append(self, fd: int, key: JournalKey, lines: list[bytes]) -> None:
        """Write `lines`, each tagged with the offset it lands at (under self._lock)."""
        end = os.lseek(fd, 0, os.SEEK_END)
        # Bytes someone else appended may end without a newline: start on a line of our own.
        prefix = b"" if end == self._end else b"\n"
        line = prefix + key.tag(self._current, end + len(prefix), lines)
        self._end = end + len(line)
        written = os.write(fd, line)
        while written < len(line):  # a short write to a regular file: disk full or a signal
            line = line[written:]
            written = os.write(fd, line)

    def _dropped(self) -> None:
        self._counts["dropped"] += 1
        if self._counts["dropped"] % 1000 == 1:
            log.exception("audit: a decision was dropped (%d so far)", self._counts["dropped"])

    async def start(self) -> None:
        """Create the tables, replay what the journal holds beyond the committed position, start flushing."""
        if self._pos is not None:
            return
        await audit_store.create_audit_tables(self._engine)
        private_dir(self._dir)
        self._lock_fd = take_lock(self._dir / "lock")
        try:
            self._journal_id = journal_id(self._dir / "journal-id")
            self._key = JournalKey.of(self._dir, self._journal_id, self._seal)
            opening = await audit_open.check(self._engine, self._seal, LocalAnchor.read(self._dir / "anchor"))
            self._sealed_from = opening.sealed_from
            self._head, pos = await audit_store.load_state(self._engine, self._journal_id)
            segments = self._segments()
            pos = pos or ((segments[0], 0) if segments else (0, 0))
            for n in segments:
                if n < pos[0]:  # committed already; a crash came between the commit and the unlink
                    self._segment(n).unlink(missing_ok=True)
            self._pos, self._closed, self._stopping = pos, False, False
            self._loop = asyncio.get_running_loop()
            with self._lock:
                self._current = max([*segments, pos[0]]) + 1
                if self._enabled:
                    self._fd, self._end = os.open(self._segment(self._current), _APPEND, 0o600), 0
                    if self._early:
                        self._append(self._fd, self._key, self._early)
                    self._early.clear()
            if opening.begin_seal is not None:
                await self._begin_seal(opening, pos)
            await self.flush()
        except BaseException:
            self._release()
            raise
        if self._enabled:
            self._task = asyncio.create_task(self._run(), name="memfed-audit-flusher")

    async def _begin_seal(self, opening: audit_open.Opening, pos: tuple[int, int]) -> None:
        """Record, sealed, that sealing begins (before anything else is stored under the seal)."""
        note = marker("audit.seal_began", opening.begin_seal or "")
        self._head = await audit_store.append_batch(
            self._engine,
            self._head or Head(),
            [note],
            self._journal_id,
            *pos,
            seal=self._seal,
            genesis=opening.sealed_since or True,
        )
        self._sealed_from = opening.sealed_since[0] if opening.sealed_since else self._head.seq
        self._note_anchor()
        log.warning("audit: %s (entry %d)", opening.begin_seal, self._head.seq)

    def _note_anchor(self) -> None:
        if self._head is not None and self._head.seq > 0:
            LocalAnchor(self._head.seq, self._head.hash, self._sealed_from).write(self._dir / "anchor")

    async def close(self) -> None:
        """Stop the flusher, commit everything journaled, close the journal. Later decisions are dropped."""
        if self._task is not None:
            self._stopping = True
            self._wake.set()
            await self._task
            self._task = None
        if self._pos is not None:
            try:
                await self.flush()
            except Exception:
                log.exception("audit: final flush failed; the journal keeps the entries for the next start")
        self._release()

    def _release(self) -> None:
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None
        self._pos = None

    async def flush(self) -> None:
        """Commit everything journaled so far (raises if the database refuses)."""
        async with self._flush_lock:
            self._waiting = 0
            while self._pos is not None and (batch := await self._next_batch(*self._pos)) is not None:
                items, pos, sets = batch
                before = self._pos[0]
                if items or self._markers or sets:
                    await self._commit(items, pos, sets)
                else:
                    self._pos = pos  # past blank lines, or on to the next segment: nothing to commit
                if pos[0] != before:
                    self._segment(before).unlink(missing_ok=True)  # wholly committed
            if self._pos is not None and self._pos[0] == self._current and self._pos[1] >= self._segment_bytes:
                with self._lock:  # rotate
                    if self._fd is not None:
                        old, self._fd = self._fd, os.open(self._segment(self._current + 1), _APPEND, 0o600)
                        self._current, self._end = self._current + 1, 0
                        os.close(old)

    async def _run(self) -> None:
        delay = self._interval
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            self._wake.clear()
            try:
                started = time.perf_counter()
                await self.flush()
                metrics.audit_flushed(time.perf_counter() - started)
                delay = self._interval
            except Exception:
                delay = min(max(delay * 2, 0.1), 5.0)
                log.exception("audit: flush failed; retrying in %.1fs (the journal keeps the entries)", delay)

    async def _next_batch(self, segment: int, offset: int) -> replay.Batch | None:
        return await replay.next_batch(self._dir, self._key, (segment, offset), current=self._current,
                                       batch_size=self._batch_size, rejected=self._count_rejected)  # fmt: skip

    def _count_rejected(self) -> None:
        self._counts["rejected"] += 1

    async def _commit(self, items: list[tuple[Any, ...]], pos: tuple[int, int], sets: dict[str, str]) -> None:
        pending, self._markers = self._markers, []
        try:
            for _ in range(10):
                head = self._head or Head()
                try:
                    batch = [*pending, *items]
                    self._head = await audit_store.append_batch(
                        self._engine, head, batch, self._journal_id, *pos, sets=sets, seal=self._seal
                    )
                    break
                except HeadMoved:  # another writer shares the database: chain after its entries
                    moved, _pos = await audit_store.load_state(self._engine, self._journal_id)
                    if self._seal is not None and (
                        moved.seq < head.seq or not self._seal.holds(self._seal.head(moved.seq, moved.hash), moved.seal)
                    ):
                        raise AuditLogRefused(
                            f"the decision log's head moved from entry {head.seq} to {moved.seq} "
                            "without this log's seal: it was rewritten or cut; nothing is sealed "
                            "on top of it"
                        ) from None
                    self._head = moved
                    log.warning("audit: chain head moved from %d to %d by another writer", head.seq, self._head.seq)
                    if self._head.seq < head.seq:
                        note = f"the chain's head went back from entry {head.seq} ({head.hash}) to {self._head.seq}"
                        pending.insert(0, marker("audit.head_moved_back", note))
            else:
                raise RuntimeError("audit: the chain head keeps moving; is another writer looping?")
        except BaseException:
            self._markers = pending + self._markers  # journal lines are simply read again
            raise
        self._pos = pos
        self._counts["stored"] += len(batch)
        if batch:
            self._note_anchor()

    def _segment(self, n: int) -> Path:
        return replay.segment_path(self._dir, n)

    def _segments(self) -> list[int]:
        return replay.segments(self._dir)

    async def query(self, filters: AuditQuery, cursor: str | None = None,
                    limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
        """A page of entries (dicts in the documented entry shape) and the next page's cursor."""
        return await audit_query.query(self._engine, filters, cursor, limit, self._bodies)

    async def verify(self, anchor: Head | None = None) -> VerifyReport:
        """Check the stored chain; against `anchor` (seq and hash an operator kept) if given, else a started
        log checks it still holds what this process wrote."""
        if anchor is not None:
            return await audit_store.verify(self._engine, anchor, seal=self._seal, anchor_name="the anchor")
        return await audit_store.verify(self._engine, self._head if self._pos is not None else None, seal=self._seal)

    async def anchor(self) -> tuple[VerifyReport, Head | None]:
        """The stored head, for an operator to keep outside the database, and the check of the log up to it."""
        async with self._engine.connect() as conn:
            head = await audit_store.load_head(conn)
        return await audit_store.verify(self._engine, head, seal=self._seal), head

    async def export_lines(self, filters: AuditQuery | None = None) -> AsyncIterator[str]:
        """The log as NDJSON lines (canonical JSON, newline-terminated), in sequence order."""
        async for entry in audit_query.iter_links(self._engine, filters):
            yield canonical_json(entry) + "\n"

    async def export(self, out: Any, filters: AuditQuery | None = None) -> int:
        """Write the log as NDJSON to `out` (anything with a sync or async `write(str)`); returns the count."""
        count = 0
        async for line in self.export_lines(filters):
            if inspect.isawaitable(result := out.write(line)):
                await result
            count += 1
        return count

    def backlog(self) -> int:
        """Decisions journaled since the last commit began (the metrics' audit backlog)."""
        return self._waiting

    def journal_state(self) -> str:
        """For readiness: "ok" (the journal is open and its directory writable), "disabled" or "closed"."""
        if not self._enabled:
            return "disabled"
        if self._fd is None or not os.access(self._dir, os.W_OK):
            return "closed"
        return "ok"

    def stats(self) -> dict[str, int]:
        """stored; dropped (log closed, too many before start, or the journal write failed); rejected (journal
        lines this gateway did not write); head_seq."""
        return {**self._counts, "head_seq": self._head.seq if self._head is not None else 0}


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
