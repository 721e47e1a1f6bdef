"""The contract between the gateway and a memory provider.

The gateway owns everything above the provider (tree, grants, references across memories, stamping
the writer); a provider owns its records and how it finds them. An adapter turns these calls into one
vendor's API. Every method receives memories the gateway has already authorized: an adapter never sees
grants and never decides who may read what.

All values crossing the seam are the frozen dataclasses below, never vendor JSON, so that a test of the
gateway can run against any adapter and a test of an adapter needs no gateway.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

RecordStatus = Literal["active", "superseded", "forgotten"]
Include = Literal["active", "all"]
Signal = Literal["query", "text", "filters"]
SIGNALS: tuple[Signal, ...] = ("query", "text", "filters")
CORE_TYPES = ("episode", "fact", "note", "procedure", "link", "entity")


# --------------------------------------------------------------------------- errors


class ProviderError(Exception):
    """Base of every failure an adapter reports. Raised `from` the vendor's own exception."""

    reason = "unavailable"


class ProviderUnavailable(ProviderError):
    """The vendor did not answer usefully: connection refused, 5xx, an answer we cannot parse."""

    reason = "unavailable"


class ProviderTimeout(ProviderError):
    """The vendor did not answer within the adapter's timeout."""

    reason = "timeout"


class ProviderRateLimited(ProviderUnavailable):
    """The vendor said 429. `retry_after` is in seconds when the vendor said how long to wait."""

    reason = "rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The vendor refused the request as invalid (a 4xx that is not ours to retry)."""

    reason = "rejected"


class Unsupported(ProviderError):
    """The provider cannot do this operation at all (the gateway answers `memory_unsupported`)."""

    reason = "unsupported"


class RecordNotFound(Exception):
    """No such record in this memory. Not a provider failure: a normal answer."""


# --------------------------------------------------------------------------- record values


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


@dataclass(frozen=True)
class NewRecord:
    """A record to write, as stated. The gateway stamps `written_by` and `written_at`."""

    type: str
    content: tuple[Part, ...]
    written_by: Writer
    written_at: datetime
    title: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    references: tuple[Reference, ...] = ()
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True)
class Revision:
    """A new version of an existing record. A field left `None` keeps the current version's value."""

    written_by: Writer
    written_at: datetime
    type: str | None = None
    title: str | None = None
    content: tuple[Part, ...] | None = None
    attributes: Mapping[str, Any] | None = None
    references: tuple[Reference, ...] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


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


def utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC: the gateway stamps aware ones, and guessing a local zone would
    make the same instant sort differently on two machines."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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


def encode_cursor(position: tuple[str | int, str]) -> str:
    """An opaque listing cursor for a keyset position `(order value, record id)`."""
    raw = json.dumps(list(position), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, order_type: type) -> tuple[Any, str]:
    """The position a cursor from `encode_cursor` names; ProviderRejected for one this adapter did not give."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        order, record_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ProviderRejected("invalid cursor") from exc
    if type(order) is not order_type or not isinstance(record_id, str):
        raise ProviderRejected("invalid cursor")
    return order, record_id


# --------------------------------------------------------------------------- recall values

FilterOp = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in"]
FILTER_OPS: tuple[str, ...] = ("eq", "ne", "gt", "gte", "lt", "lte", "in")


@dataclass(frozen=True)
class Condition:
    """One field condition: `field` is `type`, `attributes.<name>` or `time.<name>`."""

    field: str
    op: FilterOp
    value: Any


@dataclass(frozen=True)
class RecallQuery:
    """What one provider is asked for; `filters` are ANDed. At least one signal is set."""

    query: str | None = None
    text: str | None = None
    filters: tuple[Condition, ...] = ()
    types: tuple[str, ...] = ()
    as_of: datetime | None = None
    include: Include = "active"
    limit: int = 10

    def signals(self) -> tuple[Signal, ...]:
        asked: list[Signal] = []
        if self.query:
            asked.append("query")
        if self.text:
            asked.append("text")
        if self.filters:
            asked.append("filters")
        return tuple(asked)


@dataclass(frozen=True)
class Hit:
    """One result of a provider's own ranking. `score` is the provider's and is not comparable."""

    record: Record
    score: float
    why: tuple[Signal, ...]


@dataclass(frozen=True)
class RecallAnswer:
    """A provider's ranked hits, best first, over all memories it was asked about at once."""

    hits: tuple[Hit, ...]
    abstain: bool = False
    degraded: tuple[str, ...] = ()


# --------------------------------------------------------------------------- capabilities

Support = Literal["native", "emulated", "false"]


@dataclass(frozen=True)
class Capabilities:
    """A provider's capability document (UHP Memories §10.2), as data.

    `signals` lists what recall answers; `emulated_signals` those of them the adapter supplies itself
    (for example meaning approximated by words): they are still answered, and said to be emulated.
    """

    isolation: Literal["container", "enforced_filter"]
    derivation: Literal["write_time", "background", "agent", "none"]
    signals: tuple[Signal, ...]
    emulated_signals: tuple[Signal, ...] = ()
    abstain: bool = False
    keeps_episodes: bool = True
    observe_answers: Literal["records", "job", "none"] = "records"
    history_content: Literal["versions", "snapshots", "none"] = "versions"
    history_structure: Literal["versions", "snapshots", "none"] = "versions"
    revise: Support = "native"
    forget: Support = "native"
    erase_unreachable: Literal["reported", "none"] = "reported"
    as_of: bool = True
    prime: bool = False
    consolidate: Literal["runs", "trigger", "false"] = "false"
    named_queries: bool = False
    free_query_languages: tuple[str, ...] = ()
    free_query_write: bool = False
    types: bool = False
    graph_entities: Literal["derived", "stated", "none"] = "stated"
    media: tuple[str, ...] = ("text/*",)
    bytes: Literal["kept", "referenced"] = "referenced"
    describes: tuple[str, ...] = ()
    searches_many_memories: bool = True

    def document(self, provider_id: str) -> dict[str, Any]:
        """The §10.2 JSON shape, with memfed's additions under `x.memfed`."""
        free: dict[str, Any] | bool = (
            {"languages": list(self.free_query_languages), "write": self.free_query_write}
            if self.free_query_languages
            else False
        )
        return {
            "id": provider_id,
            "isolation": self.isolation,
            "derivation": self.derivation,
            "observe": {"keeps_episodes": self.keeps_episodes, "answers": self.observe_answers},
            "recall": {
                "signals": list(self.signals),
                "abstain": self.abstain,
                "emulated": list(self.emulated_signals),
            },
            "history": {"content": self.history_content, "structure": self.history_structure},
            "revise": self.revise,
            "forget": self.forget,
            "erase": {"unreachable": self.erase_unreachable},
            "prime": self.prime,
            "consolidate": self.consolidate if self.consolidate != "false" else False,
            "queries": {"named": self.named_queries, "free": free},
            "types": self.types,
            "graph": {"entities": self.graph_entities},
            "content": {"media": list(self.media), "bytes": self.bytes, "describes": list(self.describes)},
            "x.memfed": {"as_of": self.as_of, "searches_many_memories": self.searches_many_memories},
        }


# --------------------------------------------------------------------------- the provider


@runtime_checkable
class Provider(Protocol):
    """What every adapter implements. `memory_id` is always one the gateway has authorized."""

    def capabilities(self) -> Capabilities: ...

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        """Write one record as stated; version 1, status active."""
        ...

    async def get(self, memory_id: str, record_id: str, as_of: datetime | None = None) -> Record:
        """The current version (or the one current at `as_of`). RecordNotFound if not in this memory."""
        ...

    async def list(
        self,
        memory_id: str,
        *,
        types: Sequence[str] = (),
        include: Include = "active",
        as_of: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page:
        """Current versions, newest first; `include="all"` adds forgotten records."""
        ...

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        """Append a version that supersedes the current one and return it."""
        ...

    async def forget(self, memory_id: str, record_id: str, by: Writer, at: datetime) -> Record:
        """Close the record (status forgotten); its versions stay in history."""
        ...

    async def history(self, memory_id: str, record_id: str) -> Sequence[Record]:
        """Every version, oldest first."""
        ...

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        """Remove content for good; ids the provider could not fully remove go in `unreachable`."""
        ...

    async def recall(self, memory_ids: Sequence[str], query: RecallQuery) -> RecallAnswer:
        """Search these memories at once; undeclared signals are left out and reported in degraded."""
        ...

    async def count(self, memory_ids: Sequence[str]) -> Mapping[str, int]:
        """Active records per memory, for the counts on a memory object."""
        ...

    async def drop_memory(self, memory_id: str) -> None:
        """Remove every record of a memory that is being deleted."""
        ...

    async def close(self) -> None: ...
