"""Rules every adapter applies when it writes a new version of a record, whatever its store.

A revision keeps each field the caller left out; a new version never starts before the one it closes
(a clock stepping back between two writes is clamped to the last write, or `as_of` would find two
current versions, or none, at one instant); a record that follows a type or harness is changed there,
not by writing to it.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from adapters.base import Follows, NewRecord, Record, RecordTime, Revision, Unsupported, Writer, utc

T = TypeVar("T")


def or_keep(new: T | None, current: T) -> T:
    """The revised value, or the current one where the revision leaves the field out."""
    return current if new is None else new


def revised(revision: Revision, field: str, current: T | None) -> T | None:
    """A field the record may lack (title, validity): emptied when the revision clears it, else or_keep."""
    if field in revision.clear:
        return None
    new: T | None = getattr(revision, field)
    return current if new is None else new


def not_before(at: datetime, previous: datetime) -> datetime:
    """`at` as a UTC instant, clamped to `previous` when the clock stepped back."""
    at, previous = utc(at), utc(previous)
    return at if at >= previous else previous


def first_version(memory_id: str, record: NewRecord, follows: Follows | None = None) -> Record:
    """A new record as its first version, under a new id, exactly as stated (for the stores that make
    their own record ids: the embedded providers on SQLite and PostgreSQL)."""
    return Record(
        id="hrec_" + secrets.token_hex(16),
        memory_id=memory_id,
        type=record.type,
        content=record.content,
        written_by=record.written_by,
        time=RecordTime(record.written_at, record.valid_from, record.valid_to),
        title=record.title,
        attributes=record.attributes,
        references=record.references,
        follows=follows,
        write_id=record.write_id,
    )


def revision_of(current: Record, memory_id: str, revision: Revision, at: datetime) -> Record:
    """`revision` applied to `current` as the version after it, open from `at` (already clamped by
    `not_before`): each field the revision leaves out kept, active again even if `current` was forgotten."""
    t = current.time
    return Record(
        id=current.id,
        memory_id=memory_id,
        type=or_keep(revision.type, current.type),
        content=or_keep(revision.content, current.content),
        written_by=revision.written_by,
        time=RecordTime(at, revised(revision, "valid_from", t.valid_from), revised(revision, "valid_to", t.valid_to)),
        version=current.version + 1,
        supersedes=current.version,
        title=revised(revision, "title", current.title),
        attributes=or_keep(revision.attributes, current.attributes),
        references=or_keep(revision.references, current.references),
        follows=current.follows,
        write_id=revision.write_id,
    )


def tombstone(current: Record, *, by: Writer, at: datetime, write_id: str | None) -> Record:
    """The forget of `current` as the version after it: forgotten, by `by`, open from `at` (not before the
    version it closes starts), keeping everything else of the record so history shows what was forgotten."""
    when = not_before(at, current.time.written_at)
    return replace(
        current,
        version=current.version + 1,
        supersedes=current.version,
        status="forgotten",
        written_by=by,
        time=replace(current.time, written_at=when, invalidated_at=None),
        write_id=write_id,
    )


def refuse_following(record: Record, verb: str) -> None:
    """Unsupported for a record that follows a type or harness: it changes where it is defined."""
    if record.follows is not None:
        f = record.follows
        raise Unsupported(
            f"record {record.id} follows the {f.kind} {f.name!r} ({f.id}) and cannot be {verb} here:"
            f" change the {f.kind} itself"
        )
