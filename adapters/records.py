"""Record values that cross the seam between gateway and provider (part of the contract in adapters.base),
with their JSON forms, time normalization and the listing cursor every adapter uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from adapters import cursors
from adapters.clock import utc
from adapters.errors import ProviderRejected

RecordStatus = Literal["active", "superseded", "forgotten"]


@dataclass(frozen=True)
class FileRef:
    """A file part's pointer into the gateway's file store (the bytes never cross this seam)."""

    id: str
    name: str
    media_type: str
    bytes: int


@dataclass(frozen=True)
class Part:
    """One element of a record's ordered content.

    `type` is "text", "file" or an "x."-prefixed kind; `extra` keeps every key of an extension part
    (or any unknown key of a core part) so it is carried unchanged.
    """

    type: str
    text: str | None = None
    file: FileRef | None = None
    role: str | None = None
    text_source: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def part_to_json(part: Part, *, nest_extra: bool = True) -> dict[str, Any]:
    """A part as JSON. Kept (nest_extra) with an extension part's own keys under "extra", so a key named
    like a core one ("text") cannot be mistaken for it when read back; on the wire, as the chapter shows
    parts, with them beside `type`."""
    out: dict[str, Any] = {} if nest_extra else dict(part.extra)
    out["type"] = part.type
    if part.text is not None:
        out["text"] = part.text
    if part.file is not None:
        f = part.file
        out["file"] = {"id": f.id, "name": f.name, "media_type": f.media_type, "bytes": f.bytes}
    if part.role is not None:
        out["role"] = part.role
    if part.text_source is not None:
        out["text_source"] = part.text_source
    if nest_extra and part.extra:
        out["extra"] = dict(part.extra)
    return out


def part_from_json(data: Any) -> Part:
    """The kept form back into a Part; ValueError when it is not one."""
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise ValueError("a content part has no type")
    f = data.get("file")
    try:
        file = FileRef(str(f["id"]), str(f["name"]), str(f["media_type"]), int(f["bytes"])) if f else None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a file part is malformed: {exc}") from exc
    extra = data.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise ValueError("a part's extra is not an object")
    return Part(data["type"], text=data.get("text"), file=file, role=data.get("role"),
                text_source=data.get("text_source"), extra=dict(extra))


@dataclass(frozen=True)
class Reference:
    """An edge from the record that holds it to the record it names; `rel` is carried unchanged."""

    memory_id: str
    record_id: str
    rel: str | None = None


@dataclass(frozen=True)
class Writer:
    """Who wrote a version: `kind` is member or provider; `type` is the member's human|agent."""

    kind: str
    id: str
    type: str | None = None
    on_behalf_of: str | None = None
    consolidation_id: str | None = None


def writer_to_json(writer: Writer) -> dict[str, Any]:
    """`{kind, id}` and whichever of type, on_behalf_of, consolidation_id are set."""
    out: dict[str, Any] = {"kind": writer.kind, "id": writer.id}
    for key in ("type", "on_behalf_of", "consolidation_id"):
        value = getattr(writer, key)
        if value is not None:
            out[key] = value
    return out


@dataclass(frozen=True)
class RecordTime:
    written_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    invalidated_at: datetime | None = None


@dataclass(frozen=True)
class Follows:
    kind: str
    id: str
    name: str


@dataclass(frozen=True)
class Record:
    """One version of a record as a provider keeps it. `id` stays the same across versions."""

    id: str
    memory_id: str
    type: str
    content: tuple[Part, ...]
    written_by: Writer
    time: RecordTime
    version: int = 1
    status: RecordStatus = "active"
    supersedes: int | None = None
    title: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    references: tuple[Reference, ...] = ()
    follows: Follows | None = None
    # The memfed write that made this version (None for one written without), kept with it by the adapter.
    write_id: str | None = None


@dataclass(frozen=True)
class NewRecord:
    """A record to write, as stated. The gateway stamps `written_by` and `written_at`, and `write_id`: the
    id of this write, which the adapter keeps with the version so the write can be found again
    (`FindsWrites.find_write`) when its outcome is unknown."""

    type: str
    content: tuple[Part, ...]
    written_by: Writer
    written_at: datetime
    title: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    references: tuple[Reference, ...] = ()
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    write_id: str | None = None


@dataclass(frozen=True)
class Revision:
    """A new version of an existing record. A field left `None` keeps the current version's value; a
    field named in `clear` (one of CLEARABLE) is emptied instead, as a PATCH with `null` asks. `write_id`
    is kept with the new version, as for `NewRecord`."""

    written_by: Writer
    written_at: datetime
    type: str | None = None
    title: str | None = None
    content: tuple[Part, ...] | None = None
    attributes: Mapping[str, Any] | None = None
    references: tuple[Reference, ...] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    clear: frozenset[str] = frozenset()
    write_id: str | None = None

    def __post_init__(self) -> None:
        if not self.clear <= CLEARABLE:
            raise ValueError(f"only {', '.join(sorted(CLEARABLE))} can be cleared")


CLEARABLE = frozenset({"title", "valid_from", "valid_to"})  # the fields a record may lack


@dataclass(frozen=True)
class Page:
    """One page of a listing; `next` is an opaque cursor or None on the last page."""

    items: tuple[Record, ...]
    next: str | None = None


@dataclass(frozen=True)
class Erasure:
    """What erase removed, and the ids of what it could not reach (history, derived copies)."""

    erased: tuple[str, ...]
    unreachable: tuple[str, ...]


def words_of(record: Record) -> str:
    """The words a vendor embeds and searches: the title, then each part's words, in order; never empty.

    A file part without words is named by its file name so a search for it still has something to match.
    A text part that repeats the title is not repeated, because a fact is often stated as both. A record may
    be an extension part with no words at all: its type stands in, since vendors refuse or skip empty text.
    """
    title = (record.title or "").strip()
    pieces = [title] if title else []
    for part in record.content:
        words = (part.text or "").strip() or (part.file.name.strip() if part.file is not None else "")
        if words and words != title:
            pieces.append(words)
    return "\n\n".join(pieces) or f"({record.type})"


def instant(value: Any, what: str) -> datetime:
    """A filter's time value (a datetime or an ISO 8601 string) as a UTC instant; ProviderRejected otherwise."""
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, str):
        try:
            return utc(datetime.fromisoformat(value))
        except ValueError as exc:
            raise ProviderRejected(f"{what}: {value!r} is not an ISO 8601 instant") from exc
    raise ProviderRejected(f"{what}: expected an instant, got {type(value).__name__}")


RECORDS_LISTING = "records"


def encode_cursor(position: tuple[str | int, str]) -> str:
    """The records listing's cursor (adapters.cursors) for a keyset position `(order value, record id)`."""
    return cursors.encode(RECORDS_LISTING, position)


def decode_cursor(cursor: str, order_type: type) -> tuple[Any, str]:
    """The position a cursor from `encode_cursor` names; InvalidCursor (a ProviderRejected) for one this
    adapter did not give."""
    order, record_id = cursors.decode(RECORDS_LISTING, cursor, (order_type, str))
    return order, record_id
