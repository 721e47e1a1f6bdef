# ruff: noqa: S608 - the statements here are this module's own constants.
"""The sealed in-memory SQLite database a local query runs in: one memory's records and nothing else.

Built fresh for each run by adapters/local/queries.py, and closed after it. What seals it:
- it is `:memory:` and holds only the records it was given, so nothing else exists to be named;
- an authorizer allows only a SELECT, reads of `records`, `refs`, `json_each` and `json_tree`, the
  functions in `FUNCTIONS` and recursive CTEs, and denies the rest when a statement is compiled
  (ATTACH, PRAGMA, writes, schema changes, transactions, SQLite's internal tables, other functions);
- `PRAGMA query_only`, and an attached-database limit of 0, behind the authorizer;
- limits on the length of any value, of the statement, of its bytecode and of LIKE/GLOB patterns.

Time is bounded by a progress handler between VM instructions (local_queries.py), which cannot stop a
single function call. So every function allowed here does work linear in its arguments (at most
`MAX_VALUE_BYTES` each): `printf`/`format` (whose width makes a billion characters from a literal) and
`json_patch` are left out, LIKE and GLOB patterns are kept short, and `instr`, `replace` and the
two-argument `trim`s, which SQLite computes in time proportional to the product of their arguments'
lengths, are replaced by linear ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

# Kept small and flat so that an agent can write a correct statement from this text (§6.5).
SCHEMA_TEXT = """\
-- One memory's current, active records (forgotten records and older versions are not here).
CREATE TABLE records (
    id          TEXT PRIMARY KEY, -- the record's id
    type        TEXT NOT NULL,    -- episode, fact, note, procedure, link, entity or an x. type
    title       TEXT,
    text        TEXT NOT NULL,    -- the words of every part, one part per line
    content     TEXT NOT NULL,    -- JSON array of parts: {type, text, role, file: {id, name, media_type, bytes}, ...}
    attributes  TEXT NOT NULL,    -- JSON object: json_extract(attributes, '$.account') or attributes ->> 'account'
    version     INTEGER NOT NULL,
    written_at  TEXT NOT NULL,    -- ISO 8601 UTC, e.g. 2026-10-01T09:00:00.000Z (sorts as text)
    written_by  TEXT NOT NULL,    -- the writer as a principal: member:<id> or provider:<id>
    writer_type TEXT,             -- human or agent, for a member
    valid_from  TEXT,
    valid_to    TEXT
);
-- References between records of this memory (references to other memories are not here).
CREATE TABLE refs (
    record_id TEXT NOT NULL,      -- the record that holds the reference
    target_id TEXT NOT NULL,      -- the record of this memory it names
    rel       TEXT                -- subject, object, or the writer's own relation
);
"""
_INDEXES = "CREATE INDEX refs_from ON refs (record_id); CREATE INDEX refs_to ON refs (target_id);"
RECORD_COLUMNS = (
    "id", "type", "title", "text", "content", "attributes", "version", "written_at", "written_by",
    "writer_type", "valid_from", "valid_to",
)  # fmt: skip
READABLE = frozenset({"records", "refs", "json_each", "json_tree"})
FUNCTIONS = frozenset(
    {
        # core scalars (not printf, format, randomblob, zeroblob, random, load_extension, sqlite_*, changes)
        "abs", "char", "coalesce", "glob", "hex", "ifnull", "iif", "instr", "length", "like", "likelihood",
        "likely", "lower", "ltrim", "max", "min", "nullif", "quote", "replace", "round", "rtrim", "sign",
        "substr", "substring", "trim", "typeof", "unicode", "unlikely", "upper", "soundex",
        # aggregates and windows
        "avg", "count", "group_concat", "string_agg", "sum", "total", "row_number", "rank", "dense_rank",
        "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value", "nth_value",
        # dates
        "date", "time", "datetime", "julianday", "strftime", "unixepoch",
        # JSON (not json_patch)
        "json", "json_array", "json_array_length", "json_extract", "json_insert", "json_object", "json_remove",
        "json_replace", "json_set", "json_type", "json_valid", "json_quote", "json_group_array",
        "json_group_object", "->", "->>",
        # math
        "acos", "asin", "atan", "atan2", "ceil", "ceiling", "cos", "exp", "floor", "ln", "log", "log10", "log2",
        "mod", "pi", "pow", "power", "sin", "sqrt", "tan", "trunc",
    }
)  # fmt: skip

MAX_VALUE_BYTES = 4 * 1024 * 1024  # any one string or blob; above the 2 MiB a request body may carry
LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 200_000,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 200,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 100,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}


def open_container(rows: Sequence[tuple[Any, ...]], refs: Sequence[tuple[Any, ...]]) -> sqlite3.Connection:
    """A new in-memory database holding these rows only (in the columns of SCHEMA_TEXT), sealed. The
    caller closes it."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.executescript(SCHEMA_TEXT + _INDEXES)
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO records VALUES ({', '.join('?' * len(RECORD_COLUMNS))})", rows)
        db.executemany("INSERT INTO refs VALUES (?, ?, ?)", refs)
        db.execute("COMMIT")
        # The first use of an eponymous virtual table registers it in the schema, which the authorizer
        # would see as a write to sqlite_master; register both before sealing.
        db.execute("SELECT * FROM json_each('[]'), json_tree('[]')").fetchall()
        internal = {row[0].lower() for row in db.execute("SELECT name FROM sqlite_master")}
        internal |= {row[0].lower() for row in db.execute("PRAGMA module_list")}
        for name, arity, fn in _LINEAR:
            db.create_function(name, arity, fn, deterministic=True)
        db.execute("PRAGMA query_only = ON")
        for limit, value in LIMITS.items():
            db.setlimit(limit, value)
        db.set_authorizer(_authorizer(frozenset(internal - READABLE)))
    except BaseException:
        db.close()
        raise
    return db


# --------------------------------------------------------------------------- the authorizer


def _authorizer(internal: frozenset[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """Allow SELECT, recursive CTEs, the listed functions and reading the container's tables.

    SQLite reports a table from which no column is read (`count(*)`, `SELECT 1 FROM t`) as a read of
    column "" without naming the database, the same for a table and for a CTE the statement defined.
    Such a read reveals at most a number of rows; it is allowed unless the name is one of SQLite's
    own (`internal`: the schema tables, every virtual-table module, pragma_* and sqlite_* names).
    """

    def authorize(action: int, arg1: str | None, arg2: str | None, db_name: str | None, _src: str | None) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            table = (arg1 or "").lower()
            if table in READABLE and db_name in ("main", None):
                return sqlite3.SQLITE_OK
            if arg2 == "" and db_name is None and not (table in internal or table.startswith(("sqlite_", "pragma_"))):
                return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in FUNCTIONS:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


# --------------------------------------------------------------------------- linear replacements

Value = str | bytes | int | float | None
S = TypeVar("S", str, bytes)  # a text or a blob, stripped alike
E = TypeVar("E")  # one of its elements: a character, or a byte's value


def _text(value: Value) -> str | bytes:
    return value if isinstance(value, str | bytes) else str(value)


def _instr(haystack: Value, needle: Value) -> int | None:
    if haystack is None or needle is None:
        return None
    h, n = _text(haystack), _text(needle)
    if isinstance(h, bytes) != isinstance(n, bytes):
        h, n = _as_str(h), _as_str(n)
    return h.find(n) + 1  # type: ignore[arg-type] # both str or both bytes, as checked above


def _replace(value: Value, old: Value, new: Value) -> str | None:
    if value is None or old is None or new is None:
        return None
    v, o, n = _as_str(_text(value)), _as_str(_text(old)), _as_str(_text(new))
    if not o:
        return v
    # Refuse before building: the result would break the value limit SQLite applies to its own.
    if len(v) + v.count(o) * max(0, len(n) - len(o)) > MAX_VALUE_BYTES:
        raise ValueError("string or blob too big")
    return v.replace(o, n)


def _stripper(left: bool, right: bool) -> Callable[[Value, Value], Value]:
    def strip(value: Value, chars: Value) -> Value:
        if value is None or chars is None:
            return None
        v, c = _text(value), _text(chars)
        if isinstance(v, bytes) and isinstance(c, bytes):
            return _strip(v, set(c), bytes, left, right)
        # Text and bytes mixed: both read as text, as SQLite reads them.
        return _strip(_as_str(v), set(_as_str(c)), "".join, left, right)

    return strip


def _strip(v: S, wanted: set[E], joined: Callable[[set[E]], S], left: bool, right: bool) -> S:
    if len(wanted) <= 256:
        # The C strip scans `chars` once per character it looks at: fast while `chars` is short.
        few = joined(wanted)
        v = v.lstrip(few) if left else v
        return v.rstrip(few) if right else v
    start, end = 0, len(v)
    while left and start < end and v[start] in wanted:
        start += 1
    while right and end > start and v[end - 1] in wanted:
        end -= 1
    return v[start:end]


def _as_str(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


_LINEAR: tuple[tuple[str, int, Callable[..., Any]], ...] = (
    ("instr", 2, _instr),
    ("replace", 3, _replace),
    ("trim", 2, _stripper(True, True)),
    ("ltrim", 2, _stripper(True, False)),
    ("rtrim", 2, _stripper(False, True)),
)
