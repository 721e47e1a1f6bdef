"""Named and free SQL queries on the embedded provider, each in a container it cannot leave (§6.5).

The provider's file holds every memory in one table, so a caller's statement never runs on it: no
condition in the statement could be trusted to stay there. Each run instead copies one memory's
current, active records (what `list` shows, read with the memory's id bound here, outside anything the
caller wrote) into a fresh in-memory database sealed by adapters/local/_query_container.py, and runs the
statement there. Another memory's records, the provider's tables and the gateway's are not in it, so
no statement can name them; the seal (an authorizer, query_only, no attachments, limits) keeps the
statement from reaching a file, writing, or changing the container.

Here: one statement that reads (Python's sqlite3 refuses a trailing second one, and it must begin with
SELECT, WITH or VALUES); parameters bound by name from JSON values; and the bounds, each reported in
`degraded` when it cuts a result short: a time budget enforced by a progress handler (an endless
recursive CTE is interrupted), a row cap and a byte cap. Runs use a small thread pool of their own, so
a statement that uses its whole budget holds neither the event loop, nor the provider's connection,
nor the threads the rest of the gateway shares.

A result whose columns are exactly those of `records` (`SELECT * FROM records ...`, `SELECT r.* ...`)
and whose ids all name records in the container is answered as those records; any other as rows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, TypeVarTuple

import aiosqlite

from adapters.base import ProviderRejected, Record, Unsupported
from adapters.local import _sql as sql
from adapters.local._query_container import RECORD_COLUMNS, SCHEMA_TEXT, open_container
from adapters.pace import off_the_clock
from adapters.queries import DEFAULT_MAX_ROWS, DEFAULT_MAX_SECONDS, QueryCheck, QueryParamError, QueryResult

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
LANGUAGE = "sql"

MAX_RESULT_BYTES = 4 * 1024 * 1024
# VM instructions between two looks at the clock: ~0.1 ms of an endless statement's work. Each look is a
# Python call on the statement's thread and takes the GIL from the event loop; every 100 instructions it
# was hundreds of thousands of takes a second, while the loop served everyone else.
_PROGRESS_EVERY = 20_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?(?:\*/|\Z))*", re.S)
_READS = ("select", "with", "values")
# The container's rows, made by SQLite from the provider's rows (`_local_sql.SCHEMA`): the current
# version of each active record of one memory, as `list` shows them, newest first. Instants are stored
# as ...T09:00:00.000000Z and shown to a statement to the millisecond, as the API shows them.
COPY = """
SELECT v.record_id AS id, v.type, v.title,
       coalesce((SELECT group_concat(t, char(10)) FROM (SELECT json_extract(p.value, '$.text') AS t
                 FROM json_each(v.content) p WHERE t IS NOT NULL ORDER BY p.key)), '') AS text,
       v.content, v.attributes, v.version, substr(v.written_at, 1, 23) || 'Z' AS written_at,
       json_extract(v.written_by, '$.kind') || ':' || json_extract(v.written_by, '$.id') AS written_by,
       json_extract(v.written_by, '$.type') AS writer_type,
       substr(v.valid_from, 1, 23) || 'Z' AS valid_from, substr(v.valid_to, 1, 23) || 'Z' AS valid_to,
       v.refs
FROM versions v
WHERE v.memory_id = :memory AND v.invalidated_at IS NULL AND v.forgets = 0
ORDER BY v.written_at DESC, v.record_id DESC LIMIT :n
"""
VERSIONS = (
    "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.record_id IN (SELECT value FROM json_each(:ids))"
)


def _yield_the_cpu() -> None:
    """Run this thread at the lowest priority (Linux: nice 19 for the thread alone). A member's statement
    may spin for its whole budget; at normal priority on a machine of two cores it took one of them from
    the event loop and the provider's threads serving everyone else. At nice 19 it runs on what they
    leave: under contention it does less work within its budget, and the budget stays a wall time."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


# At most this many statements run at once in this process; more wait for a thread. A few, because
# each may use its whole time budget.
_RUNNERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memfed-query", initializer=_yield_the_cpu)


# --------------------------------------------------------------------------- the mixin


class LocalQueries:
    """`QueryingProvider` for `LocalProvider`, which inherits it. Reads the memory's records through
    the provider's own connection (under its lock), then runs the statement on a thread, off the lock
    and off the event loop."""

    _reading: Callable[[], AbstractAsyncContextManager[aiosqlite.Connection]]
    # The most records one container holds (the newest); beyond it a run says so in `degraded`. Copying
    # takes about 15 ms per thousand records, and must fit in the provider's timeout with the statement.
    query_max_records = 20_000

    def query_languages(self) -> tuple[str, ...]:
        return (LANGUAGE,)

    def query_schema(self, language: str) -> str:
        _language(language)
        return SCHEMA_TEXT

    async def check_query(self, language: str, statement: str) -> QueryCheck:
        _language(language)
        return await _in_thread(check, statement)

    async def run_named(
        self, memory_id: str, language: str, body: str, params: Mapping[str, Any], *,
        max_rows: int = DEFAULT_MAX_ROWS, max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> QueryResult:
        return await self.run_free(memory_id, language, body, params, max_rows=max_rows, max_seconds=max_seconds)

    async def run_free(
        self, memory_id: str, language: str, statement: str, params: Mapping[str, Any], *,
        max_rows: int = DEFAULT_MAX_ROWS, max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> QueryResult:
        _language(language)
        if max_rows < 1 or max_seconds <= 0:
            raise ProviderRejected("a query needs at least one row and some time")
        _refuse_non_reads(statement)
        rows, refs, more = await self._snapshot(memory_id)
        result = await _in_thread(run, rows, refs, statement, params, max_rows, max_seconds)
        degraded = ((f"query:memory_capped_at_{self.query_max_records}_records",) if more else ()) + result.degraded
        versions = {row[0]: row[6] for row in rows}
        if result.columns == RECORD_COLUMNS and all(row[0] in versions for row in result.rows):
            wanted = list(dict.fromkeys(row[0] for row in result.rows))
            records = await self._versions(memory_id, {i: versions[i] for i in wanted})
            return QueryResult(columns=result.columns, records=records, degraded=degraded)
        return QueryResult(columns=result.columns, rows=result.rows, degraded=degraded)

    async def _snapshot(self, memory_id: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], bool]:
        """The container's rows for the memory's current active records, made by SQLite from the
        provider's file; the memory's id is bound here, outside anything a caller wrote."""
        async with self._reading() as db:
            fetched = list(await db.execute_fetchall(COPY, {"memory": memory_id, "n": self.query_max_records + 1}))
        got = fetched[: self.query_max_records]
        rows = [tuple(r)[: len(RECORD_COLUMNS)] for r in got]
        refs: list[tuple[Any, ...]] = []
        for r in got:
            if r["refs"] != "[]":
                # A reference into another memory would name that memory and a record in it, which a
                # reader of this one may not be allowed to know of (the gateway hides such references
                # per reader); only this memory's own are copied.
                refs.extend((r["id"], ref["record_id"], ref.get("rel"))
                            for ref in json.loads(r["refs"]) if ref.get("memory_id") == memory_id)
        return rows, refs, len(fetched) > self.query_max_records

    async def _versions(self, memory_id: str, wanted: Mapping[str, int]) -> tuple[Record, ...]:
        """Exactly the versions the statement saw, in its order; one erased since is left out."""
        params = {"memory": memory_id, "ids": json.dumps(list(wanted))}
        async with self._reading() as db:
            got = await db.execute_fetchall(VERSIONS, params)
        by_id = {r["record_id"]: r for r in got if r["version"] == wanted[r["record_id"]]}
        return tuple(sql.record(by_id[i]) for i in wanted if i in by_id)


async def _in_thread(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    # Off the vendor's clock: waiting for one of the few runners behind other callers' statements, and
    # the caller's statement itself, bounded by its own budget, say nothing of the file's health.
    with off_the_clock("budget"):
        return await asyncio.get_running_loop().run_in_executor(_RUNNERS, fn, *args)


def _language(language: str) -> None:
    if language != LANGUAGE:
        raise Unsupported(f"the embedded provider runs queries in {LANGUAGE!r}, not {language!r}")


def _refuse_non_reads(statement: str) -> None:
    # A fifth wall, and the one that names the problem plainly: the authorizer would refuse a write
    # anyway, but REINDEX and VACUUM are not shown to it at all.
    lead = _LEADING.match(statement)
    rest = statement[lead.end() if lead else 0 :]
    word = re.match(r"[A-Za-z]+", rest)
    if word is None or word.group(0).lower() not in _READS:
        raise ProviderRejected("a query is one statement that reads: it begins with SELECT, WITH or VALUES")


# --------------------------------------------------------------------------- running


class _Bindings(dict[str, Any]):
    """The parameters as sqlite3 asks for them by name: JSON values become SQL values (an array or an
    object as its JSON text, so `json_each(:ids)` works), and a missing one is named. Every name the
    statement asks for is kept in `asked`; with `fill_null` a missing one is bound NULL instead (for
    `check`, which learns the names without values)."""

    def __init__(self, given: Mapping[str, Any] | None = None, *, fill_null: bool = False) -> None:
        super().__init__(given or {})
        self.asked: list[str] = []
        self.fill_null = fill_null

    def __getitem__(self, name: str) -> Any:
        if name not in self.asked:
            self.asked.append(name)
        if not _NAME.match(name):
            raise QueryParamError(f"parameter {name!r}: name parameters :like_this (not ? or ?1)", name)
        if not super().__contains__(name):
            if self.fill_null:
                return None
            raise QueryParamError(f"the statement needs parameter {name!r}, which was not given", name)
        return _bindable(name, super().__getitem__(name))


def _bindable(name: str, value: Any) -> Any:
    if value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):  # bool included: SQLite keeps true as 1
        if not -(2**63) <= value < 2**63:
            raise QueryParamError(f"parameter {name!r} is too large for a 64-bit integer", name)
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    raise QueryParamError(f"parameter {name!r} must be a JSON value", name)


def check(statement: str) -> QueryCheck:
    """Compile (EXPLAIN, so nothing runs) on an empty sealed container: refused as a run would be,
    or the parameter names the statement uses."""
    _refuse_non_reads(statement)
    db = open_container((), ())
    bindings = _Bindings(fill_null=True)
    try:
        _guarded(lambda: db.execute("EXPLAIN " + statement, bindings).fetchall(), lambda: False)
    finally:
        db.close()
    return QueryCheck(parameters=tuple(bindings.asked))


def run(
    records: Sequence[tuple[Any, ...]], refs: Sequence[tuple[Any, ...]], statement: str,
    params: Mapping[str, Any], max_rows: int, max_seconds: float,
) -> QueryResult:
    """Build the container from these rows of `records` and `refs`, run the statement in it within the
    bounds, close it. Rows only: the caller turns a result of records' rows into records."""
    db = open_container(records, refs)
    deadline = time.monotonic() + max_seconds
    late = [False]

    def tick() -> int:
        if time.monotonic() > deadline:
            late[0] = True
            return 1  # non-zero interrupts the statement
        return 0

    db.set_progress_handler(tick, _PROGRESS_EVERY)
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = []
    degraded: list[str] = []
    size = 0
    try:
        cursor = _guarded(lambda: db.execute(statement, _Bindings(params)), lambda: late[0])
        if cursor is not None:
            if cursor.description is None:
                raise ProviderRejected("the statement returns no rows: a query is a SELECT")
            columns = tuple(d[0] for d in cursor.description)
            while True:
                batch = _guarded(lambda: cursor.fetchmany(100), lambda: late[0])
                if not batch:
                    break
                for raw in batch:
                    if len(rows) == max_rows:
                        degraded.append(f"query:rows_capped_at_{max_rows}")
                        break
                    row = tuple(_scalar(v) for v in raw)
                    size += sum(len(v) if isinstance(v, str) else 8 for v in row)
                    if size > MAX_RESULT_BYTES:
                        degraded.append(f"query:bytes_capped_at_{MAX_RESULT_BYTES}")
                        break
                    rows.append(row)
                if degraded:
                    break
    finally:
        db.close()
    if late[0]:
        degraded.append(f"query:time_limit_{max_seconds:g}s")
    return QueryResult(columns=columns, rows=tuple(rows), degraded=tuple(degraded))


def _guarded(step: Callable[[], Any], interrupted: Callable[[], bool]) -> Any:
    """Run one sqlite3 step; SQLite's refusals become ProviderRejected, the time budget becomes None."""
    try:
        return step()
    except QueryParamError:
        raise
    except sqlite3.OperationalError as exc:
        if str(exc) == "interrupted" and interrupted():
            return None
        if str(exc) == "user-defined function raised exception":
            # The container's own functions raise only to refuse a value longer than SQLite would make.
            raise ProviderRejected("the statement was refused: string or blob too big") from exc
        raise ProviderRejected(f"the statement was refused: {exc}") from exc
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        # DatabaseError "not authorized", ProgrammingError (a second statement, a NUL character),
        # DataError "string or blob too big": each is the statement's doing.
        raise ProviderRejected(f"the statement was refused: {exc}") from exc


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no Infinity or NaN
    return value
