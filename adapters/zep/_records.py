"""How a memfed record version lives in one Zep graph object, and how Zep's own objects read back.

Each version of a record is one object: a `fact` an edge, an `entity` a node, every other type an
episode (text, or json when its content has parts other than text). memfed's fields travel in six keys
where Zep reads them back (`Dialect.carrier`): an episode's metadata (v4 allows ten keys), an edge's or a
node's attributes (both variants read those back without metadata):

    memfed_record   the record id (`hrec_` + 32 hex), the same for every version
    memfed_memory   the memory id, checked on every read
    memfed_version  the version number
    memfed_write    the write id of the memfed write that made it ("" for none)
    memfed_type     the record type (Zep filters on it: `metadata_filters`)
    memfed_pack     the version's other fields as one JSON string (title, content, attributes, references,
                    status, writer, times, follows)

and, so that Zep can filter on them (`_pushdown`), `memfed_attr_<key>` for each attribute key the provider
names in `filter_attributes` (two at most: v4's ten metadata keys hold these six, the two a close adds,
`memfed_closed_at` and `superseded_by`, and these), when the value is a string of at most 200 characters
or a number; the value stays in the pack too, which is what reads use. An object written before
these keys existed reads the same, and a filter sent to Zep admits an object without the key.

An object without them is Zep's own: an edge or node Zep derived from an episode, an episode another
client wrote. It reads as a record written by `{kind: provider, id: zep}`, its id `hrec_` + the Zep UUID's
hex (stable, reversible), and is never taken for a stated one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from adapters import clock
from adapters.base import Part, Record, RecordStatus, RecordTime, Reference, Writer
from adapters.records import words_of as render_text
from adapters.version_format import BadMetadata, version_json, version_record
from adapters.zep._shapes import ANCHOR_LABEL, ANCHOR_NAME, METADATA_KEYS, Carrier, Kind

RECORD_PREFIX = "hrec_"
ZEP_WRITER = Writer(kind="provider", id="zep")
KEYS = ("memfed_record", "memfed_memory", "memfed_version", "memfed_write", "memfed_type", "memfed_pack")
CLOSED = "memfed_closed_at"  # v4's mark on a version a later one closed (attributes or metadata)
CLOSE_KEYS = 2  # CLOSED and `superseded_by`
MAX_FILTER_ATTRIBUTES = METADATA_KEYS - len(KEYS) - CLOSE_KEYS
ATTR_PREFIX = "memfed_attr_"
LONGEST_KEPT = 200  # a longer string is left to the pack: it would only repeat it


@dataclass(frozen=True)
class Version:
    """One version as it lies at Zep: the record value, the object behind it, and its kind."""

    record: Record
    kind: Kind
    item: Mapping[str, Any]
    derived: bool = False

    @property
    def uuid(self) -> str:
        return str(self.item["uuid"])


def new_record_id() -> str:
    return uuidlib.uuid4().hex


def record_id_for(write_id: str) -> str:
    """The record id a remember with this write id makes: the same id when the write is sent again."""
    return RECORD_PREFIX + hashlib.blake2b(write_id.encode(), digest_size=16).hexdigest()





def kind_of(record_type: str) -> Kind:
    return "edge" if record_type == "fact" else "node" if record_type == "entity" else "episode"


def _filterable(value: Any) -> bool:
    # No boolean: memfed never sends a condition on one (a vendor may take true for 1).
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (isinstance(value, str) and len(value) <= LONGEST_KEPT)


def pack(record: Record, filter_attributes: Sequence[str] = ()) -> dict[str, Any]:
    fields = version_json(record)
    fields.pop("write_id", None)
    try:
        # orjson would write a NaN as null, changing the record: refused, as JSON cannot carry it.
        json.dumps(fields, allow_nan=False)
        packed = orjson.dumps(fields).decode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the record cannot be stored at Zep: {exc}") from exc
    keys: dict[str, Any] = {
        "memfed_record": record.id, "memfed_memory": record.memory_id, "memfed_version": record.version,
        "memfed_write": record.write_id or "", "memfed_type": record.type, "memfed_pack": packed}
    for name in filter_attributes[:MAX_FILTER_ATTRIBUTES]:
        value = record.attributes.get(name)
        if value is not None and _filterable(value):
            keys[ATTR_PREFIX + name] = value
    return keys


def episode_body(record: Record) -> tuple[str, str]:
    """(data, type): text for words only, json when the content holds files or extension parts."""
    if all(p.type == "text" for p in record.content):
        return render_text(record), "text"
    parts = [{"type": p.type, "text": p.text} if p.text else {"type": p.type} for p in record.content]
    return orjson.dumps({"title": record.title, "content": parts}).decode(), "json"


def carried(item: Mapping[str, Any], carrier: Carrier) -> Mapping[str, Any] | None:
    """memfed's keys on an object, or None when it carries none (Zep's own)."""
    found = item.get(carrier)
    if not isinstance(found, Mapping) or "memfed_record" not in found:
        return None
    return found





def stated(item: Mapping[str, Any], kind: Kind, carrier: Carrier, memory_id: str) -> Version | None:
    """A version memfed wrote, or None for an object that is Zep's own or another memory's."""
    keys = carried(item, carrier)
    if keys is None or keys.get("memfed_memory") != memory_id:
        return None
    record_id = keys.get("memfed_record")
    if not isinstance(record_id, str) or not record_id.startswith(RECORD_PREFIX):
        raise BadMetadata("a record id memfed did not make")
    try:
        fields = orjson.loads(str(keys.get("memfed_pack")))
    except orjson.JSONDecodeError as exc:
        raise BadMetadata("memfed_pack is not JSON") from exc
    record = version_record(fields, record_id=record_id, memory_id=memory_id)
    write = keys.get("memfed_write")
    return Version(replace(record, write_id=write or None), kind, item)


def derived_id(zep_uuid: str) -> str:
    try:
        return RECORD_PREFIX + uuidlib.UUID(zep_uuid).hex
    except ValueError:
        return RECORD_PREFIX + "z" + "".join(c for c in zep_uuid if c.isalnum())[:64]


def is_anchor(item: Mapping[str, Any]) -> bool:
    return item.get("name") == ANCHOR_NAME and ANCHOR_LABEL in (item.get("labels") or ())


def zeps_own(item: Mapping[str, Any], kind: Kind, memory_id: str,
             record_of: Callable[[str], str | None]) -> Version | None:
    """An object Zep made (or another client wrote) as a record; None for Zep's bookkeeping (the anchor
    node, the fact_triple episode Zep keeps for every fact added directly). `record_of` names the record
    a Zep UUID stands for, so a derived fact references the records it was derived from."""
    if kind == "node" and is_anchor(item):
        return None
    if kind == "episode" and item.get("source") == "fact_triple":
        return None
    created = clock.parse(item.get("created_at"))
    if created is None:
        return None
    refs: list[Reference] = []
    if kind == "edge":
        text = str(item.get("fact") or "")
        for rel, key in (("subject", "source_node_uuid"), ("object", "target_node_uuid")):
            target = record_of(str(item.get(key) or ""))
            if target:
                refs.append(Reference(memory_id, target, rel))
    elif kind == "node":
        text = str(item.get("summary") or item.get("name") or "")
    else:
        text = str(item.get("content") or "")
    for episode in item.get("episode_uuids") or ():
        source = record_of(str(episode))
        if source:
            refs.append(Reference(memory_id, source, "derived_from"))
    expired = clock.parse(item.get("expired_at"))
    record = Record(
        id=derived_id(str(item["uuid"])), memory_id=memory_id,
        type={"edge": "fact", "node": "entity", "episode": "episode"}[kind],
        title=str(item.get("name")) if kind != "episode" and item.get("name") else None,
        content=(Part(type="text", text=text),), written_by=ZEP_WRITER,
        time=RecordTime(written_at=created, valid_from=clock.parse(item.get("valid_at")),
                        valid_to=clock.parse(item.get("invalid_at")), invalidated_at=expired),
        status="superseded" if expired is not None else "active",
        attributes={k: v for k, v in (item.get("attributes") or {}).items() if not str(k).startswith("memfed_")},
        references=tuple(refs),
    )
    return Version(record, kind, item, derived=True)


def chains(versions: Sequence[Version]) -> dict[str, list[Version]]:
    """Versions by record, oldest first, each closed by the one after it (status and invalidated_at)."""
    by_record: dict[str, list[Version]] = {}
    for version in versions:
        by_record.setdefault(version.record.id, []).append(version)
    for chain in by_record.values():
        chain.sort(key=lambda v: v.record.version)
        for i, (older, newer) in enumerate(itertools.pairwise(chain)):
            status: RecordStatus = "forgotten" if older.record.status == "forgotten" else "superseded"
            closed = replace(older.record, status=status,
                             time=replace(older.record.time, invalidated_at=newer.record.time.written_at))
            chain[i] = replace(older, record=closed)
    return by_record
