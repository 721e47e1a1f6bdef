"""How a memfed record lives in the SaaS memory's records (shared/vendors/saas-memory.md, "How a memfed
memory maps onto it").

A UHP type becomes a kind (`fact`, `entity`, `link` and extension types: semantic; `episode`: episodic;
`procedure`: procedural; `note`: semantic with category `note`); `attributes.importance` (0..1, default
0.5) and `attributes.tier` (core | contextual | archival, default contextual) become the vendor's own
fields, `attributes.category` its category, `time.valid_to` its expiry. What the vendor has no place for
(title, the UHP type, the full content parts, references, validity, writer, version, write id) travels in
`metadata["memfed"]`, so a record read back equals the one written.

A record's versions are a supersession chain at the vendor: each revise stores a new vendor record that
supersedes the last, so the chain is the history. A forget marks the chain's head (memfed's metadata
`forgotten`, and `expires_at` now) and a later revise may supersede even that head, so one vendor record
yields one version, or two when it was forgotten. Version numbers are places in that sequence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from adapters.base import (
    Follows,
    Part,
    ProviderRejected,
    Record,
    RecordTime,
    Reference,
    Writer,
    part_from_json,
    part_to_json,
    writer_to_json,
)
from adapters.records import words_of as render_text
from adapters.saas import wire as w
from adapters.writer_format import BadWriter, checked_writer

NAMESPACE = "memfed"
SCHEMA = 1
DEFAULT_IMPORTANCE = 0.5
VENDOR_WRITER = Writer(kind="provider", id="saas")  # a record memfed finds in the scope but did not write

_KIND_OF = {"episode": "episodic", "procedure": "procedural"}  # every other type is semantic
_TYPE_OF = {"episodic": "episode", "procedural": "procedure", "semantic": "fact"}


class BadMetadata(ValueError):
    """memfed's namespace is present but not in a shape this code wrote."""


@dataclass(frozen=True)
class Forgotten:
    by: Writer
    at: datetime
    write_id: str | None


# --------------------------------------------------------------------------- the vendor's fields


def kind_of(record_type: str) -> str:
    return _KIND_OF.get(record_type, "semantic")


def importance_of(attributes: Mapping[str, Any]) -> float:
    value = attributes.get("importance", DEFAULT_IMPORTANCE)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProviderRejected("attributes.importance must be a number from 0 to 1")
    if not 0 <= value <= 1:
        raise ProviderRejected("attributes.importance must be from 0 to 1")
    return float(value)


def tier_of(attributes: Mapping[str, Any]) -> str:
    value = attributes.get("tier", w.DEFAULT_TIER)
    if value not in w.TIERS:
        raise ProviderRejected(f"attributes.tier must be one of {', '.join(w.TIERS)}")
    return str(value)


def category_of(record_type: str, attributes: Mapping[str, Any]) -> str | None:
    value = attributes.get("category")
    if value is not None:
        if not isinstance(value, str) or not 0 < len(value) <= 200:
            raise ProviderRejected("attributes.category must be a string of at most 200 characters")
        return value
    return "note" if record_type == "note" else None





def fields(version: Record, *, root: str | None = None, forgotten: Forgotten | None = None) -> dict[str, Any]:
    """The store / supersede body for one version (scope fields are the provider's to add). `root` is the
    vendor id of the chain's first record, kept with every later one so that one record read alone (a
    recall hit) names its memfed record without walking the chain."""
    attributes = version.attributes
    meta: dict[str, Any] = {"schema": SCHEMA, "memory_id": version.memory_id, "version": _version_json(version)}
    if root is not None:
        meta["root"] = root
    if forgotten is not None:
        meta["forgotten"] = _forgotten_json(forgotten)
    body: dict[str, Any] = {
        w.F_CONTENT: render_text(version),
        w.F_KIND: kind_of(version.type),
        w.F_TIER: tier_of(attributes),
        w.F_IMPORTANCE: importance_of(attributes),
        w.F_METADATA: {NAMESPACE: meta},
        w.F_EXPIRES: w.format_time(forgotten.at) if forgotten else _opt(version.time.valid_to),
    }
    if (category := category_of(version.type, attributes)) is not None:
        body[w.F_CATEGORY] = category
    try:
        # A NaN (which a JSON encoder would send as bare NaN or null) or an object JSON cannot carry is
        # refused here, as the caller's mistake, before anything is sent.
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ProviderRejected(f"the record cannot be stored at the SaaS memory: {exc}") from exc
    return body


def forget_fields(item: Mapping[str, Any], forgotten: Forgotten) -> dict[str, Any]:
    """The correct-in-place body that forgets a chain's head: expired now, with who and when in metadata."""
    metadata = dict(item.get(w.F_METADATA) or {})
    meta = dict(metadata.get(NAMESPACE) or {})
    meta["forgotten"] = _forgotten_json(forgotten)
    metadata[NAMESPACE] = meta
    return {w.F_EXPIRES: w.format_time(forgotten.at), w.F_METADATA: metadata}


def held_count(item: Mapping[str, Any]) -> int:
    """How many versions one vendor record holds: one, or two once it was forgotten."""
    meta = memfed_meta(item) or {}
    return 2 if isinstance(meta.get("forgotten"), Mapping) else 1


def number_of(item: Mapping[str, Any]) -> int | None:
    """The version number memfed stored with a vendor record, if it did."""
    raw = (memfed_meta(item) or {}).get("version")
    number = raw.get("number") if isinstance(raw, Mapping) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def renumbered(item: Mapping[str, Any], number: int) -> dict[str, Any]:
    """The correct-in-place body that gives a vendor record's version memfed's number `number`."""
    metadata = dict(item.get(w.F_METADATA) or {})
    meta = dict(metadata.get(NAMESPACE) or {})
    meta["version"] = {**dict(meta.get("version") or {}), "number": number}
    metadata[NAMESPACE] = meta
    return {w.F_METADATA: metadata}


def _opt(value: datetime | None) -> str | None:
    return w.format_time(value) if value is not None else None


def _version_json(record: Record) -> dict[str, Any]:
    return {
        "type": record.type, "title": record.title,
        "content": [part_to_json(p) for p in record.content],
        "attributes": dict(record.attributes),
        "references": [{"memory_id": r.memory_id, "record_id": r.record_id, "rel": r.rel} for r in record.references],
        "written_by": writer_to_json(record.written_by),
        "written_at": w.format_time(record.time.written_at),
        "valid_from": _opt(record.time.valid_from), "valid_to": _opt(record.time.valid_to),
        "follows": ({"kind": record.follows.kind, "id": record.follows.id, "name": record.follows.name}
                    if record.follows else None),
        "write_id": record.write_id, "number": record.version,
    }  # fmt: skip


def _forgotten_json(forgotten: Forgotten) -> dict[str, Any]:
    return {"by": writer_to_json(forgotten.by), "at": w.format_time(forgotten.at), "write_id": forgotten.write_id}


# --------------------------------------------------------------------------- reading back


def memfed_meta(item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = item.get(w.F_METADATA)
    meta = metadata.get(NAMESPACE) if isinstance(metadata, Mapping) else None
    return meta if isinstance(meta, Mapping) else None


def write_ids(item: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The write ids kept with one vendor record: of the version it holds, and of its forget."""
    meta = memfed_meta(item) or {}
    version = meta.get("version")
    forgotten = meta.get("forgotten")
    return (version.get("write_id") if isinstance(version, Mapping) else None,
            forgotten.get("write_id") if isinstance(forgotten, Mapping) else None)


def root_of(item: Mapping[str, Any]) -> str | None:
    """The vendor id of the first record of this one's chain, when memfed wrote it (None: walk the chain)."""
    meta = memfed_meta(item)
    if meta is not None and isinstance(meta.get("root"), str):
        return str(meta["root"])
    return str(item.get(w.F_ID)) if item.get(w.F_SUPERSEDES) is None else None


def current(item: Mapping[str, Any], *, record_id: str, memory_id: str) -> Record | None:
    """The current version of a chain whose head is `item`, decoded from it alone, when memfed's metadata
    numbers it (a record memfed did not write, beyond the first of its chain, needs the chain: None)."""
    held = _held(item, record_id=record_id, memory_id=memory_id)
    meta = memfed_meta(item) or {}
    raw = meta.get("version")
    number = raw.get("number") if isinstance(raw, Mapping) else None
    if held[0].written_by == VENDOR_WRITER or not isinstance(number, int):
        if item.get(w.F_SUPERSEDES) is not None:
            return None
        number = 1
    last = held[-1]
    place = number + len(held) - 1
    return replace(last, version=place, supersedes=place - 1 if place > 1 else None)


def chain_versions(chain: Sequence[Mapping[str, Any]], *, record_id: str, memory_id: str) -> list[Record]:
    """Every version a chain of vendor records (oldest first) holds, oldest first, numbered by place."""
    flat: list[Record] = []
    for item in chain:
        held = _held(item, record_id=record_id, memory_id=memory_id)
        flat.extend(held)
    out: list[Record] = []
    for place, version in enumerate(flat, start=1):
        following = flat[place] if place < len(flat) else None
        version = replace(version, version=place, supersedes=place - 1 if place > 1 else None)
        if following is not None:
            version = replace(version, status="superseded",
                              time=replace(version.time, invalidated_at=following.time.written_at))
        out.append(version)
    return out


def _held(item: Mapping[str, Any], *, record_id: str, memory_id: str) -> list[Record]:
    meta = memfed_meta(item) or {}
    try:
        version = _decoded(meta, record_id=record_id, memory_id=memory_id)
    except (BadMetadata, KeyError, TypeError, ValueError):
        # Not written by memfed, or edited at the vendor into a shape memfed did not write: shown as the
        # vendor holds it.
        version = _foreign(item, record_id=record_id, memory_id=memory_id)
    forgotten = meta.get("forgotten")
    if not isinstance(forgotten, Mapping):
        return [version]
    try:
        tombstone = replace(version, status="forgotten", written_by=_writer(forgotten["by"]),
                            time=replace(version.time, written_at=_time(forgotten["at"])),
                            write_id=forgotten.get("write_id") if isinstance(forgotten.get("write_id"), str) else None)
    except (BadMetadata, KeyError, TypeError):
        return [version]
    return [version, tombstone]


def _decoded(meta: Mapping[str, Any], *, record_id: str, memory_id: str) -> Record:
    if meta.get("schema") != SCHEMA or meta.get("memory_id") != memory_id:
        raise BadMetadata("not memfed's schema or not this memory")
    raw = meta["version"]
    follows = raw.get("follows")
    write_id = raw.get("write_id")
    if write_id is not None and not isinstance(write_id, str):
        raise BadMetadata("a write id is not a string")
    return Record(
        id=record_id, memory_id=memory_id, type=str(raw["type"]),
        content=tuple(part_from_json(p) for p in raw["content"]),
        written_by=_writer(raw["written_by"]),
        time=RecordTime(written_at=_time(raw["written_at"]), valid_from=_opt_time(raw.get("valid_from")),
                        valid_to=_opt_time(raw.get("valid_to"))),
        title=raw.get("title") if isinstance(raw.get("title"), str) else None,
        attributes=dict(raw.get("attributes") or {}),
        references=tuple(Reference(str(r["memory_id"]), str(r["record_id"]), r.get("rel"))
                         for r in raw.get("references") or ()),
        follows=Follows(str(follows["kind"]), str(follows["id"]), str(follows["name"])) if follows else None,
        write_id=write_id,
    )  # fmt: skip


def _foreign(item: Mapping[str, Any], *, record_id: str, memory_id: str) -> Record:
    """A record memfed did not write (the vendor's smart ingest derived it, or another client wrote it)."""
    kind = item.get(w.F_KIND)
    category = item.get(w.F_CATEGORY)
    record_type = "note" if kind == "semantic" and category == "note" else _TYPE_OF.get(str(kind), "fact")
    attributes: dict[str, Any] = {"importance": item.get(w.F_IMPORTANCE, DEFAULT_IMPORTANCE),
                                  "tier": item.get(w.F_TIER, w.DEFAULT_TIER)}
    if isinstance(category, str) and record_type != "note":
        attributes["category"] = category
    written = w.parse_time(item.get(w.F_CREATED)) or w.parse_time(item.get(w.F_UPDATED))
    if written is None:
        raise BadMetadata("a vendor record without a creation time")
    return Record(
        id=record_id, memory_id=memory_id, type=record_type,
        content=(Part(type="text", text=str(item.get(w.F_CONTENT) or "")),),
        written_by=VENDOR_WRITER, time=RecordTime(written_at=written, valid_to=w.parse_time(item.get(w.F_EXPIRES))),
        attributes=attributes,
    )  # fmt: skip


def _writer(raw: Any) -> Writer:
    if not isinstance(raw, Mapping):
        raise BadMetadata("written_by is not an object")
    try:  # anyone holding the tenant's key can edit metadata: a writer memfed would not stamp is not believed
        return checked_writer(raw.get("kind"), raw.get("id"), raw.get("type"), raw.get("on_behalf_of"),
                              raw.get("consolidation_id"))
    except BadWriter as exc:
        raise BadMetadata(str(exc)) from exc


def _time(value: Any) -> datetime:
    parsed = w.parse_time(value)
    if parsed is None:
        raise BadMetadata("a time is not ISO 8601")
    return parsed


def _opt_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)
