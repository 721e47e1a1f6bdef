"""The contract between the gateway and a memory provider.

The gateway owns everything above the provider (tree, grants, references across memories, stamping
the writer); a provider owns its records and how it finds them. An adapter turns these calls into one
vendor's API. Every method receives memories the gateway has already authorized: an adapter never sees
grants and never decides who may read what.

All values crossing the seam are frozen dataclasses, never vendor JSON, so that a test of the gateway can
run against any adapter and a test of an adapter needs no gateway. The errors (adapters.errors) and the
record values (adapters.record_values) live in modules of their own and are part of this contract: they
are importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from adapters.errors import (
    ErasureIncomplete,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
    RecordLimit,
    RecordNotFound,
    Unsupported,
)
from adapters.record_values import (
    Erasure,
    FileRef,
    Follows,
    NewRecord,
    Page,
    Part,
    Record,
    RecordStatus,
    RecordTime,
    Reference,
    Revision,
    Writer,
    decode_cursor,
    encode_cursor,
    instant,
    part_from_json,
    part_to_json,
    utc,
    writer_to_json,
)

__all__ = [  # the contract, wherever each piece is written
    "CORE_TYPES", "FILTER_OPS", "SIGNALS", "Capabilities", "Condition", "Erasure", "ErasureIncomplete", "FileRef",
    "FilterOp", "Follows", "Hit", "Include", "NewRecord", "Page", "Part", "Provider", "ProviderError",
    "ProviderRateLimited", "ProviderRejected", "ProviderTimeout", "ProviderUnauthorized", "ProviderUnavailable",
    "RecallAnswer", "RecallQuery", "Record", "RecordLimit", "RecordNotFound", "RecordStatus", "RecordTime",
    "Reference", "Revision", "Signal", "Support", "Unsupported", "Writer", "decode_cursor", "encode_cursor",
    "instant", "part_from_json", "part_to_json", "utc", "writer_to_json",
]  # fmt: skip

Include = Literal["active", "all"]
Signal = Literal["query", "text", "filters"]
SIGNALS: tuple[Signal, ...] = ("query", "text", "filters")
CORE_TYPES = ("episode", "fact", "note", "procedure", "link", "entity")


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
    # The most records one memory can hold and still be listed whole (None: no such limit). A write that
    # would pass it is refused with `RecordLimit`.
    records_per_memory: int | None = None

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
            "x.memfed": {
                "as_of": self.as_of,
                "searches_many_memories": self.searches_many_memories,
                "records_per_memory": self.records_per_memory,
            },
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
