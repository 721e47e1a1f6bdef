"""The decision log: every access decision, journaled on the request path, chained off it.

`AuditLog.decide` encodes the entry as one line and appends it with one `os.write` to the open journal
segment (O_APPEND): once that returns, the line survives a kill -9 of the gateway (not a power cut: nothing
is fsynced on the request path). A task wakes every `flush_interval` s (sooner when `batch_size` lines wait),
reads the journal from the committed position, chains the entries (gateway.audit_store) and inserts them
with the new position in one transaction: a crash in between loses nothing (start() replays from the
committed position) and duplicates nothing (the position commits with the rows).

Under <data_dir>/audit-journal/: segments `000000000001.log`, ...; `lock` (one process per journal);
`journal-id` (its row in audit_journals). start() opens a fresh segment; one past `segment_bytes` is
rotated; a segment is deleted once wholly committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import inspect
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway import audit_store
from gateway.audit_store import AuditQuery, Head, HeadMoved, VerifyReport

__all__ = ["AuditLog", "AuditQuery", "DecisionEntry", "VerifyReport"]

log = logging.getLogger("memfed.audit")

ID_CAP, REASON_CAP, GROUPS_CAP = 256, 2048, 1000  # longer values are cut, marked with "…"
MAX_LINE, _CHUNK, _EARLY_CAP = 512 * 1024, 1024 * 1024, 100_000  # a chunk always holds a whole line


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One access decision: who, doing what, on which memory, needing which privilege, allowed or not, why.

    Deliberately nothing else: the log stores exactly these fields (with seq and the chain hashes), never
    record content; slots forbid extra attributes and long strings are cut when stored.
    """

    request_id: str
    principal: str
    groups: tuple[str, ...]
    operation: str
    memory_id: str | None
    privilege: str | None
    allowed: bool
    reason: str
    at: datetime = field(default_factory=_now)


def _line(e: DecisionEntry) -> bytes:
    """The journal line, built on every request's path: fields joined by US (0x1f), groups by RS (0x1e).

    What would not split back exactly (a separator or newline in a value, a group "") goes as JSON instead.
    An empty memory_id or privilege is stored as None, whichever the format."""
    g = e.groups
    line = "\x1f".join((str(round(e.at.timestamp() * 1_000_000)), e.request_id, e.principal, "\x1e".join(g),
                        e.operation, e.memory_id or "", e.privilege or "", "1" if e.allowed else "0", e.reason))
    if line.count("\x1f") != 8 or line.count("\x1e") != max(len(g) - 1, 0) or "\n" in line or "" in g:
        return _line_json(e)
    return (line + "\n").encode()


def _line_json(e: Any, cap: bool = False) -> bytes:
    """The JSON-array line, for what _line cannot carry: coerces odd types; never raises."""

    def text(v: Any, limit: int = ID_CAP) -> str | None:
        v = v if v is None or isinstance(v, str) else repr(v)
        return _cut(v, limit) if cap and v is not None else v

    try:
        row: list[Any] = [round(e.at.timestamp() * 1_000_000), text(e.request_id), text(e.principal),
                          [text(g) for g in list(e.groups or ())[:GROUPS_CAP]], text(e.operation), text(e.memory_id),
                          text(e.privilege), 1 if e.allowed is True else 0, text(e.reason, REASON_CAP)]  # fmt: skip
    except Exception as exc:
        row = [time.time_ns() // 1000, "", "", [], "audit.unencodable", None, None, 0, f"unencodable decision: {exc!r}"]
    return (json.dumps(row) + "\n").encode()


def _cut(value: Any, cap: int) -> str:
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    if len(s) > cap:
        s = s[: cap - 1] + "…"
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL
    return s if s.isascii() else s.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates


_SECONDS: dict[int, str] = {}


def _at(us: int) -> str:
    """RFC 3339 UTC with milliseconds from epoch microseconds (the date part cached per second)."""
    second, rest = divmod(us, 1_000_000)
    if (prefix := _SECONDS.get(second)) is None:
        if len(_SECONDS) > 256:
            _SECONDS.clear()
        prefix = _SECONDS[second] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return f"{prefix}.{rest // 1000:03d}Z"


def _item(raw: bytes) -> tuple[Any, ...]:
    """A journal line (without its newline) -> the entry's stored fields, in ITEM order. Raises on a bad line."""
    if raw[:1] != b"[":
        us, request_id, principal, names, operation, memory_id, privilege, allowed, reason = raw.decode().split("\x1f")
        groups = names.split("\x1e") if names else []
        if (b"\x00" not in raw and len(reason) <= REASON_CAP and len(groups) <= GROUPS_CAP
                and max(len(request_id), len(principal), len(operation), len(memory_id), len(privilege),
                        *map(len, groups)) <= ID_CAP):  # fmt: skip
            return (_at(int(us)), request_id, principal, groups, operation, memory_id or None, privilege or None,
                    "allow" if allowed == "1" else "deny", reason)
        fields: list[Any] = [int(us), request_id, principal, groups, operation, memory_id or None,
                             privilege or None, allowed == "1", reason]  # fmt: skip
    else:
        fields = json.loads(raw)
    us, request_id, principal, groups, operation, memory_id, privilege, allowed, reason = fields
    kept = [_cut(g, ID_CAP) for g in list(groups)[:GROUPS_CAP]]
    if len(groups) > GROUPS_CAP:
        kept.append(f"…{len(groups) - GROUPS_CAP} more")
    return (_at(round(us)), _cut(request_id, ID_CAP), _cut(principal, ID_CAP), kept, _cut(operation, ID_CAP),
            _cut(memory_id, ID_CAP) if memory_id else None, _cut(privilege, ID_CAP) if privilege else None,
            "allow" if allowed else "deny", _cut(reason, REASON_CAP))


def _marker(operation: str, reason: str) -> tuple[Any, ...]:
    """An entry the log writes about itself (operation `audit.*`), so its own trouble is on the chain."""
    return (audit_store.stamp(_now()), "", "memfed:audit", [], operation, None, None, "deny", reason)


class AuditLog:
    """The gateway's decision log. `decide` from anywhere; `start` before, `close` after serving."""

    def __init__(self, engine: AsyncEngine, data_dir: Path, *, enabled: bool = True, flush_interval: float = 0.1,
                 batch_size: int = 500, segment_bytes: int = 64 * 1024 * 1024) -> None:  # fmt: skip
        self._engine, self._enabled, self._dir = engine, enabled, Path(data_dir) / "audit-journal"
        self._interval, self._batch_size, self._segment_bytes = flush_interval, max(1, batch_size), segment_bytes
        self._lock = threading.Lock()  # guards _fd, _current, _early: decide may run in worker threads
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._current = self._waiting = 0
        self._closed = self._stopping = False
        self._early: list[bytes] = []  # decisions made before start()
        self._markers: list[tuple[Any, ...]] = []  # the log's own notes, waiting for the next commit
        self._counts = {"stored": 0, "dropped": 0}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self._journal_id = ""
        self._head: Head | None = None
        self._pos: tuple[int, int] | None = None  # the committed journal position; None: not started

    @property
    def enabled(self) -> bool:
        """Whether decisions are kept: callers skip building reasons for a log that keeps none."""
        return self._enabled

    def decide(self, entry: DecisionEntry) -> None:
        """Journal one decision: one encode and one `os.write`. Never raises, never waits on the database."""
        self.decide_many((entry,))

    def decide_many(self, entries: Sequence[DecisionEntry]) -> None:
        """Journal several decisions of one request with one `os.write` (a recall makes one per memory)."""
        if not self._enabled or not entries:
            return
        try:
            lines = []
            for entry in entries:
                try:
                    one = _line(entry)
                except Exception:  # odd types, lone surrogates
                    one = _line_json(entry)
                if len(one) > MAX_LINE:
                    one = _line_json(entry, cap=True)
                lines.append(one)
            line = b"".join(lines)
            with self._lock:
                if (fd := self._fd) is None:
                    if self._closed or len(self._early) >= _EARLY_CAP:
                        raise RuntimeError("the log is closed" if self._closed else "too many decisions before start")
                    self._early.extend(lines)
                    return
                written = os.write(fd, line)
                while written < len(line):  # a short write to a regular file: disk full or a signal
                    line = line[written:]
                    written = os.write(fd, line)
                before = self._waiting
                self._waiting += len(lines)
                kick = before < self._batch_size <= self._waiting
            if kick and self._loop is not None:  # a full batch waits: wake the flusher (from any thread)
                with contextlib.suppress(RuntimeError):  # the loop has closed: the journal has the line
                    self._loop.call_soon_threadsafe(self._wake.set)
        except Exception:
            self._counts["dropped"] += 1
            if self._counts["dropped"] % 1000 == 1:
                log.exception("audit: a decision was dropped (%d so far)", self._counts["dropped"])

    async def start(self) -> None:
        """Create the tables, replay what the journal holds beyond the committed position, start flushing."""
        if self._pos is not None:
            return
        await audit_store.create_audit_tables(self._engine)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _take_lock(self._dir / "lock")
        try:
            self._journal_id = _journal_id(self._dir / "journal-id")
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
                    self._fd = os.open(self._segment(self._current), _APPEND, 0o600)
                    for line in self._early:
                        os.write(self._fd, line)
                    self._early.clear()
            await self.flush()
        except BaseException:
            self._release()
            raise
        if self._enabled:
            self._task = asyncio.create_task(self._run(), name="memfed-audit-flusher")

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
            while self._pos is not None and (batch := self._next_batch(*self._pos)) is not None:
                items, pos = batch
                before = self._pos[0]
                if items or self._markers:
                    await self._commit(items, pos)
                else:
                    self._pos = pos  # past blank lines, or on to the next segment: nothing to commit
                if pos[0] != before:
                    self._segment(before).unlink(missing_ok=True)  # wholly committed
            if self._pos is not None and self._pos[0] == self._current and self._pos[1] >= self._segment_bytes:
                with self._lock:  # rotate
                    if self._fd is not None:
                        old, self._fd = self._fd, os.open(self._segment(self._current + 1), _APPEND, 0o600)
                        self._current += 1
                        os.close(old)

    async def _run(self) -> None:
        delay = self._interval
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            self._wake.clear()
            try:
                await self.flush()
                delay = self._interval
            except Exception:
                delay = min(max(delay * 2, 0.1), 5.0)
                log.exception("audit: flush failed; retrying in %.1fs (the journal keeps the entries)", delay)

    def _next_batch(self, segment: int, offset: int) -> tuple[list[tuple[Any, ...]], tuple[int, int]] | None:
        """Up to batch_size entries from the position on and the position after them; None when caught up."""
        try:
            with self._segment(segment).open("rb") as f:
                f.seek(offset)
                data = f.read(_CHUNK)
        except FileNotFoundError:
            data = b""
        closed = segment < self._current  # no one writes to it any more
        if (end := data.rfind(b"\n") + 1) == 0:
            if data and (closed or len(data) == _CHUNK):  # a torn last line, or garbage without newlines
                note = f"{len(data)} unreadable bytes at offset {offset} of journal segment {segment}"
                return [_marker("audit.journal_unreadable", note)], (segment, offset + len(data))
            if not closed:
                return None
            later = [n for n in self._segments() if n > segment]
            return [], (min(later) if later else self._current, 0)
        items: list[tuple[Any, ...]] = []
        at = 0
        while at < end and len(items) < self._batch_size:
            nl = data.index(b"\n", at)
            raw, start, at = data[at:nl], offset + at, nl + 1
            try:
                if raw.strip():
                    items.append(_item(raw))
            except Exception as exc:
                note = f"journal line at offset {start} of segment {segment} unreadable ({exc!r}); decision lost"
                items.append(_marker("audit.journal_unreadable", note))
        return items, (segment, offset + at)

    async def _commit(self, items: list[tuple[Any, ...]], pos: tuple[int, int]) -> None:
        pending, self._markers = self._markers, []
        try:
            for _ in range(10):
                head = self._head or Head()
                try:
                    batch = [*pending, *items]
                    self._head = await audit_store.append_batch(self._engine, head, batch, self._journal_id, *pos)
                    break
                except HeadMoved:  # another writer shares the database: chain after its entries
                    self._head, _pos = await audit_store.load_state(self._engine, self._journal_id)
                    log.warning("audit: chain head moved from %d to %d by another writer", head.seq, self._head.seq)
                    if self._head.seq < head.seq:
                        note = f"the chain's head went back from entry {head.seq} ({head.hash}) to {self._head.seq}"
                        pending.insert(0, _marker("audit.head_moved_back", note))
            else:
                raise RuntimeError("audit: the chain head keeps moving; is another writer looping?")
        except BaseException:
            self._markers = pending + self._markers  # journal lines are simply read again
            raise
        self._pos = pos
        self._counts["stored"] += len(batch)

    def _segment(self, n: int) -> Path:
        return self._dir / f"{n:012d}.log"

    def _segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self._dir.glob("*.log") if p.stem.isdigit())

    async def query(self, filters: AuditQuery, cursor: str | None = None,
                    limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
        """A page of entries (dicts in the documented entry shape) and the next page's cursor."""
        return await audit_store.query(self._engine, filters, cursor, limit)

    async def verify(self) -> VerifyReport:
        """Check the stored chain; a started log also checks it still holds what this process wrote."""
        return await audit_store.verify(self._engine, self._head if self._pos is not None else None)

    async def export_lines(self, filters: AuditQuery | None = None) -> AsyncIterator[str]:
        """The log as NDJSON lines (canonical JSON, newline-terminated), in sequence order."""
        async for entry in audit_store.iter_entries(self._engine, filters):
            yield audit_store.canonical_json(entry) + "\n"

    async def export(self, out: Any, filters: AuditQuery | None = None) -> int:
        """Write the log as NDJSON to `out` (anything with a sync or async `write(str)`); returns the count."""
        count = 0
        async for line in self.export_lines(filters):
            if inspect.isawaitable(result := out.write(line)):
                await result
            count += 1
        return count

    def stats(self) -> dict[str, int]:
        """stored; dropped (log closed, too many before start, or the journal write failed); head_seq."""
        return {**self._counts, "head_seq": self._head.seq if self._head is not None else 0}


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _take_lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise RuntimeError(f"the audit journal {path.parent} is in use by another process") from exc
    return fd


def _journal_id(path: Path) -> str:
    if not path.exists():
        path.with_suffix(".tmp").write_text(secrets.token_hex(16) + "\n")
        os.replace(path.with_suffix(".tmp"), path)
    return path.read_text().strip()
