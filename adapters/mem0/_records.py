"""How one memfed record lives inside one mem0 memory.

mem0 keeps a text (`memory`), the entity it belongs to (`user_id`) and a free `metadata` object. The text
is what mem0 embeds and searches, so it is a rendering of the record's words; everything the protocol
says of a record, and every earlier version of it, travels in `metadata["memfed"]`:

    {"schema": 1, "memory_id": "hmem_…", "text": <the text memfed sent>,
     "current": <version>, "past": [<version>, …]}      # past: oldest first

A version carries type, title, content (the full part list), attributes, references, version, supersedes,
status, written_by, time, follows and (when the gateway gave one) the `write_id` of the write that made it,
so a record read back is equal to the one written and `history` rebuilds every version exactly. mem0's own
history rows carry the text alone, which is why versions are kept here rather than rebuilt from them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from adapters import clock
from adapters.base import (
    Part,
    Record,
    RecordStatus,
    RecordTime,
    Writer,
)
from adapters.records import words_of as render_text
from adapters.version_format import BadMetadata, version_json, version_record
from adapters.versioning import not_before

NAMESPACE = "memfed"
SCHEMA = 1
# Who wrote a record memfed finds in the entity but did not write (mem0 derived it, or another client
# of the same mem0 project wrote it under this entity).
VENDOR_WRITER = Writer(kind="provider", id="mem0")


class Unstorable(ValueError):
    """A record holding a value JSON cannot carry (a NaN, an object in its attributes)."""


class OtherMemory(Exception):
    """The memory is filed under this memory's entity, but memfed wrote it for another memory."""


@dataclass(frozen=True)
class Stored:
    """A record as decoded from one mem0 memory: its current version and the ones before it."""

    current: Record
    past: tuple[Record, ...]



# --------------------------------------------------------------------------- encoding


def encode(current: Record, past: Sequence[Record] = ()) -> tuple[str, dict[str, Any]]:
    """The text and the metadata object to send to mem0 for this record and its earlier versions."""
    text = render_text(current)
    meta: dict[str, Any] = {
        "schema": SCHEMA,
        "memory_id": current.memory_id,
        "text": text,
        "current": version_json(current),
        "past": [version_json(v) for v in past],
    }
    try:
        # The client would send a NaN as bare `NaN` (not JSON) and fail outright on an object: refuse
        # both here, as a request error, before anything reaches mem0.
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Unstorable(str(exc)) from exc
    return text, {NAMESPACE: meta}


# --------------------------------------------------------------------------- decoding





def namespace_of(item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    meta = metadata.get(NAMESPACE)
    return meta if isinstance(meta, Mapping) else None


def decode(item: Mapping[str, Any], *, record_id: str, memory_id: str) -> Stored:
    """A mem0 memory object as a record of `memory_id`. The caller has checked the entity already."""
    text = item.get("memory")
    if not isinstance(text, str):
        raise BadMetadata("the memory has no text")
    meta = namespace_of(item)
    if meta is None:
        return foreign(item, record_id=record_id, memory_id=memory_id)
    if meta.get("memory_id") != memory_id:
        raise OtherMemory
    if meta.get("schema") != SCHEMA:
        raise BadMetadata(f"unknown memfed schema {meta.get('schema')!r}")
    current = version_record(meta.get("current"), record_id=record_id, memory_id=memory_id)
    past = tuple(version_record(v, record_id=record_id, memory_id=memory_id) for v in meta.get("past") or ())
    if text.strip() != str(meta.get("text", "")).strip():
        # Someone changed the text at mem0 itself (its dashboard, another client). Showing memfed's copy
        # would hide that change; showing the vendor's text as a version of its own keeps it visible and
        # keeps the chain: what memfed last wrote becomes the superseded version before it.
        vendor_at = clock.parse(item.get("updated_at"))  # mem0's clock is not the gateway's
        previous = current.time.written_at
        changed_at = not_before(vendor_at, previous) if vendor_at is not None else previous
        closed_version = closed(current, at=changed_at)
        drifted = Record(
            id=record_id,
            memory_id=memory_id,
            type=current.type,
            title=None,
            content=(Part(type="text", text=text),),
            attributes=current.attributes,
            references=current.references,
            version=current.version + 1,
            supersedes=current.version,
            status="forgotten" if current.status == "forgotten" else "active",
            written_by=VENDOR_WRITER,
            time=RecordTime(
                written_at=changed_at,
                valid_from=current.time.valid_from,
                valid_to=current.time.valid_to,
            ),
        )
        return Stored(current=drifted, past=(*past, closed_version))
    return Stored(current=current, past=past)


def foreign(item: Mapping[str, Any], *, record_id: str, memory_id: str) -> Stored:
    """A memory memfed did not write (mem0 derived it, or another client wrote it under this entity)."""
    text = item.get("memory")
    if not isinstance(text, str):
        raise BadMetadata("the memory has no text")
    written_at = clock.parse(item.get("updated_at")) or clock.parse(item.get("created_at"))
    if written_at is None:
        raise BadMetadata("the memory has no readable time")
    record = Record(
        id=record_id,
        memory_id=memory_id,
        type="fact",
        content=(Part(type="text", text=text),),
        written_by=VENDOR_WRITER,
        time=RecordTime(written_at=written_at),
    )
    return Stored(current=record, past=())


def closed(record: Record, *, at: datetime) -> Record:
    """The same version, closed at `at` by the one that follows it. A forget version stays
    `forgotten`, so history keeps the trace of the forget after a revision brings the record back."""
    status: RecordStatus = "forgotten" if record.status == "forgotten" else "superseded"
    return replace(record, status=status, time=replace(record.time, invalidated_at=at))


def written_by(stored: Stored, write_id: str) -> Record | None:
    """The version of this record that the write `write_id` made, current or past."""
    return next((v for v in (stored.current, *reversed(stored.past)) if v.write_id == write_id), None)
