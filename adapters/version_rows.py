"""A record version as a row of text columns and back: the encoding both embedded providers store.

The SQLite provider (adapters/local/) and the PostgreSQL one (adapters/postgres/) keep the same row:
instants as fixed-width UTC text (so a plain text comparison orders them), content, attributes,
references, follows and the writer as JSON text. Pure functions, no I/O; each provider's own module
holds its tables and statements.
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
from adapters.clock import rfc3339


class Row(Protocol):
    """A result row read by column name: `sqlite3.Row`, or the dict a version was written from."""

    def __getitem__(self, key: str) -> Any: ...


# --------------------------------------------------------------------------- time


utc = base.utc


def ts(value: datetime) -> str:
    """Fixed width, so that a text comparison (SQLite's, or PostgreSQL's under COLLATE "C") orders
    instants correctly."""
    return rfc3339(value, "microseconds")


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
