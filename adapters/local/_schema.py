"""How the local provider keeps a record: the tables of its SQLite file, and a `Record` as a row and back.

Pure functions and constants, no I/O: adapters/local/_sql.py builds the statements over these tables,
and `adapters/local/provider.py` runs them.

Every version of a record is one row of `versions`; the row that has no `invalidated_at` is the
current one. A version written by `forget` has `forgets = 1`. `write_id` is the memfed write that made
the version (unique in a memory, so a write sent twice is kept once), added in schema version 2: a file
from before gains the column and its index when it is opened (`WRITE_ID_COLUMN`). `words` (schema version 3)
is the version's length in tokens as FTS5 counted them, read off the word index's own sizes when the version
is written: recall ranks a memory's records by statistics of that memory alone (adapters/local/_sql.py),
which needs each version's length beside its memory. `superseded` is never stored: it is
read off `invalidated_at`, so that a read `as_of` an earlier instant can show a version as it stood
then (active, not yet closed) from the same row. `versions_fts` holds the words of every version,
keyed by the version's `seq`, so that a recall `as_of` searches what was current at that instant.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

import adapters.base as base
from adapters.base import (
    Follows,
    ProviderRejected,
    Record,
    RecordStatus,
    RecordTime,
    Reference,
    Writer,
    part_from_json,
    part_to_json,
    writer_to_json,
)

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (
    seq            INTEGER PRIMARY KEY,
    memory_id      TEXT NOT NULL,
    record_id      TEXT NOT NULL,
    version        INTEGER NOT NULL,
    forgets        INTEGER NOT NULL DEFAULT 0,
    supersedes     INTEGER,
    type           TEXT NOT NULL,
    title          TEXT,
    content        TEXT NOT NULL,
    attributes     TEXT NOT NULL,
    refs           TEXT NOT NULL,
    follows        TEXT,
    written_by     TEXT NOT NULL,
    written_at     TEXT NOT NULL,
    invalidated_at TEXT,
    valid_from     TEXT,
    valid_to       TEXT,
    write_id       TEXT,
    words          INTEGER,
    UNIQUE (record_id, version)
);
CREATE INDEX IF NOT EXISTS versions_listing
    ON versions (memory_id, invalidated_at, written_at, record_id);
CREATE VIRTUAL TABLE IF NOT EXISTS versions_fts USING fts5(
    title, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


# Run after SCHEMA: the column for a file made before it (skipped when present), then its index.
WRITE_ID_COLUMN = "ALTER TABLE versions ADD COLUMN write_id TEXT"
WRITE_ID_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS versions_write ON versions (memory_id, write_id) WHERE write_id IS NOT NULL"
)

# Run after SCHEMA, like the write ids: the column for a file made before it, its values read off the word
# index, then the index that counting a memory's live records and summing their lengths read alone (the
# counts on every memory, and each recall's statistics); it replaces version 2's `versions_live`.
WORDS_COLUMN = "ALTER TABLE versions ADD COLUMN words INTEGER"
WORDS_INDEX = "CREATE INDEX IF NOT EXISTS versions_words ON versions (memory_id, invalidated_at, forgets, words)"
OLD_LIVE_INDEX = "DROP INDEX IF EXISTS versions_live"
# `memfed_words` is `fts_words`, registered on every connection (adapters/local/_connections.py).
SET_WORDS = (
    "UPDATE versions SET words = (SELECT memfed_words(sz) FROM versions_fts_docsize WHERE id = :seq) WHERE seq = :seq"
)
FILL_WORDS = (
    "UPDATE versions SET words = (SELECT memfed_words(d.sz) FROM versions_fts_docsize d WHERE d.id = versions.seq)"
    " WHERE words IS NULL"
)


def fts_words(sizes: bytes | None) -> int:
    """The tokens of one row of the word index, all columns together, from its `_docsize` entry: one
    SQLite varint per column (big-endian groups of 7 bits, the high bit saying another byte follows)."""
    total = value = 0
    for byte in sizes or b"":
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            total, value = total + value, 0
    return total


class Row(Protocol):
    """A result row read by column name: `sqlite3.Row`, or the dict a version was written from."""

    def __getitem__(self, key: str) -> Any: ...


# --------------------------------------------------------------------------- time


utc = base.utc


def ts(value: datetime) -> str:
    """Fixed width, so that SQLite's text comparison orders instants correctly."""
    return utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def ts_or_none(value: datetime | None) -> str | None:
    return None if value is None else ts(value)


def from_ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def parse_instant(value: Any, what: str) -> str:
    return ts(base.instant(value, what))


# --------------------------------------------------------------------------- records <-> rows


def to_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProviderRejected(f"{what} cannot be stored as JSON: {exc}") from exc


def columns(record: Record) -> dict[str, Any]:
    """The row that stores one version."""
    t = record.time
    return {
        "memory_id": record.memory_id,
        "record_id": record.id,
        "version": record.version,
        "forgets": int(record.status == "forgotten"),
        "supersedes": record.supersedes,
        "type": record.type,
        "title": record.title,
        "content": to_json([part_to_json(p) for p in record.content], "content"),
        "attributes": to_json(dict(record.attributes), "attributes"),
        "refs": to_json(
            [{"memory_id": r.memory_id, "record_id": r.record_id, "rel": r.rel} for r in record.references],
            "references",
        ),
        "follows": (
            to_json({"kind": f.kind, "id": f.id, "name": f.name}, "follows")
            if (f := record.follows) is not None
            else None
        ),
        "written_by": to_json(writer_to_json(record.written_by), "written_by"),
        "written_at": ts(t.written_at),
        "invalidated_at": ts_or_none(t.invalidated_at),
        "valid_from": ts_or_none(t.valid_from),
        "valid_to": ts_or_none(t.valid_to),
        "write_id": record.write_id,
    }


def record(row: Row, as_of: str | None = None) -> Record:
    """One version as it stood at `as_of` (or now): a version closed after that instant was still
    open then, so it reads as it did, without the `invalidated_at` it later received."""
    invalidated = row["invalidated_at"]
    if as_of is not None and invalidated is not None and invalidated > as_of:
        invalidated = None
    # A forget version stays "forgotten" even once a revision follows it, so history keeps the trace.
    status: RecordStatus = (
        "forgotten" if row["forgets"] else ("superseded" if invalidated is not None else "active")
    )
    follows = json.loads(row["follows"]) if row["follows"] is not None else None
    written_at = from_ts(row["written_at"])
    if written_at is None:  # NOT NULL in the schema; a None here means the file was edited by hand
        raise ValueError(f"version without written_at: {row['record_id']} v{row['version']}")
    return Record(
        id=row["record_id"],
        memory_id=row["memory_id"],
        type=row["type"],
        content=tuple(part_from_json(p) for p in json.loads(row["content"])),
        written_by=Writer(**json.loads(row["written_by"])),
        time=RecordTime(
            written_at=written_at,
            valid_from=from_ts(row["valid_from"]),
            valid_to=from_ts(row["valid_to"]),
            invalidated_at=from_ts(invalidated),
        ),
        version=row["version"],
        status=status,
        supersedes=row["supersedes"],
        title=row["title"],
        attributes=json.loads(row["attributes"]),
        references=tuple(Reference(**r) for r in json.loads(row["refs"])),
        follows=Follows(**follows) if follows is not None else None,
        write_id=row["write_id"],
    )


def searchable(record: Record) -> tuple[str, str]:
    """(title, body) for the full-text index: every part's words, a file part's included (§4.3)."""
    return record.title or "", "\n".join(p.text for p in record.content if p.text)
