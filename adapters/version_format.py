"""A version of a record as JSON, for adapters that keep memfed's versions inside a vendor's metadata
(part of the contract: mem0 keeps them in one metadata object, Zep in one packed key).

What is read back came from a store anyone holding the vendor's key can edit, so reading it checks
every field and answers `BadMetadata` for anything memfed would not have written (a writer memfed would
not have stamped included), never a half-read record.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from adapters.base import (
    Follows,
    Part,
    Record,
    RecordStatus,
    RecordTime,
    Reference,
    Writer,
    part_from_json,
    part_to_json,
    writer_to_json,
)
from adapters.writer_format import BadWriter, checked_writer

_STATUSES: tuple[RecordStatus, ...] = ("active", "superseded", "forgotten")


class BadMetadata(ValueError):
    """memfed's namespace is present but not in a shape this code wrote."""


def _dt(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def version_json(record: Record) -> dict[str, Any]:
    """One version, without the ids that are the same for every version of the record."""
    out = _version_fields(record)
    if record.write_id is not None:
        out["write_id"] = record.write_id
    return out


def _version_fields(record: Record) -> dict[str, Any]:
    return {
        "type": record.type,
        "title": record.title,
        "content": [part_to_json(p) for p in record.content],
        "attributes": dict(record.attributes),
        "references": [
            {"memory_id": r.memory_id, "record_id": r.record_id, "rel": r.rel} for r in record.references
        ],
        "version": record.version,
        "supersedes": record.supersedes,
        "status": record.status,
        "written_by": writer_to_json(record.written_by),
        "time": {
            "written_at": _dt(record.time.written_at),
            "valid_from": _dt(record.time.valid_from),
            "valid_to": _dt(record.time.valid_to),
            "invalidated_at": _dt(record.time.invalidated_at),
        },
        "follows": (
            {"kind": record.follows.kind, "id": record.follows.id, "name": record.follows.name}
            if record.follows
            else None
        ),
    }


def _opt_dt(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadMetadata("a time is not a string")
    return datetime.fromisoformat(value)


def _part(raw: Any) -> Part:
    try:
        return part_from_json(raw)
    except ValueError as exc:
        raise BadMetadata(str(exc)) from exc


def _writer(raw: Any) -> Writer:
    if not isinstance(raw, Mapping):
        raise BadMetadata("written_by is not an object")
    # Anyone holding the vendor's key can edit this metadata: a writer memfed would not have stamped
    # is not believed (the record then reads as the vendor holds it).
    try:
        return checked_writer(raw.get("kind"), raw.get("id"), raw.get("type"), raw.get("on_behalf_of"),
                              raw.get("consolidation_id"))
    except BadWriter as exc:
        raise BadMetadata(str(exc)) from exc


def version_record(raw: Any, *, record_id: str, memory_id: str) -> Record:
    if not isinstance(raw, Mapping):
        raise BadMetadata("a version is not an object")
    try:
        time_raw = raw["time"]
        written_at = _opt_dt(time_raw["written_at"])
        if written_at is None:
            raise BadMetadata("a version has no written_at")
        status = raw.get("status", "active")
        if status not in _STATUSES:
            raise BadMetadata(f"unknown status {status!r}")
        write_id = raw.get("write_id")
        if write_id is not None and not isinstance(write_id, str):
            raise BadMetadata("a write id is not a string")
        follows_raw = raw.get("follows")
        return Record(
            id=record_id,
            memory_id=memory_id,
            type=str(raw["type"]),
            title=raw.get("title"),
            content=tuple(_part(p) for p in raw.get("content") or ()),
            attributes=dict(raw.get("attributes") or {}),
            references=tuple(
                Reference(memory_id=str(r["memory_id"]), record_id=str(r["record_id"]), rel=r.get("rel"))
                for r in raw.get("references") or ()
            ),
            version=int(raw["version"]),
            supersedes=None if raw.get("supersedes") is None else int(raw["supersedes"]),
            status=cast(RecordStatus, status),
            written_by=_writer(raw["written_by"]),
            time=RecordTime(
                written_at=written_at,
                valid_from=_opt_dt(time_raw.get("valid_from")),
                valid_to=_opt_dt(time_raw.get("valid_to")),
                invalidated_at=_opt_dt(time_raw.get("invalidated_at")),
            ),
            follows=(
                Follows(str(follows_raw["kind"]), str(follows_raw["id"]), str(follows_raw["name"]))
                if follows_raw
                else None
            ),
            write_id=write_id,
        )
    except BadMetadata:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise BadMetadata(str(exc)) from exc
