"""The contract between the gateway and a memory provider.

The gateway owns everything above the provider (tree, grants, references across memories, stamping
the writer); a provider owns its records and how it finds them. An adapter turns these calls into one
vendor's API. Every method receives memories the gateway has already authorized: an adapter never sees
grants and never decides who may read what.

All values crossing the seam are frozen dataclasses, never vendor JSON, so that a test of the gateway can
run against any adapter and a test of an adapter needs no gateway. The errors (adapters.errors) and the
record values (adapters.records) live in modules of their own and are part of this contract: they
are importable from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import httpx

from adapters.clock import utc
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
from adapters.records import (
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
    writer_to_json,
)

__all__ = [  # the contract, wherever each piece is written
    "CORE_TYPES", "FILTER_OPS", "SIGNALS", "AdapterFactory", "Capabilities", "Condition", "Erasure",
    "ErasureIncomplete", "FileRef", "FilterOp", "FindsWrites", "Follows", "Hit", "Include", "NewRecord", "Page",
    "Part", "Provider", "ProviderError", "ProviderRateLimited", "ProviderRejected", "ProviderTimeout",
    "ProviderUnauthorized", "ProviderUnavailable", "RecallAnswer", "RecallQuery", "Record", "RecordLimit",
    "RecordNotFound", "RecordStatus", "RecordTime", "Reference", "Revision", "Signal", "Support", "Unsupported",
    "Writer", "decode_cursor", "encode_cursor", "instant", "part_from_json", "part_to_json", "utc",
    "writer_to_json",
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
    # What of this recall the adapter judged itself where its capabilities declare no emulation (a
    # provider that judges part of `filters`, per recall: `filters`, `filters.attributes.region`); the
    # gateway says each as `provider:NAME:<subject>:emulated`, as it does for a declared emulated signal.
    emulated: tuple[str, ...] = ()


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
    # Where the records live: on this server ("gateway", the embedded provider) or at a vendor. The gateway
    # warns where data leaves the server (a harness's default memory, observed turns) by this, not by name.
    data_location: Literal["gateway", "vendor"] = "vendor"
    # The most records one memory can hold and still be listed whole (None: no such limit). A write that
    # would pass it is refused with `RecordLimit`.
    records_per_memory: int | None = None
    # Per filter field (`type`, `attributes.<key>`, `attributes.*`, `time.*`), whether the provider judges
    # it (native) or the adapter does on what the provider returns (emulated); empty: the `filters` signal
    # as a whole says it (`emulated_signals`).
    filter_fields: tuple[tuple[str, Support], ...] = ()

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
                "data_location": self.data_location,
                **({"filters": dict(self.filter_fields)} if self.filter_fields else {}),
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

    async def forget(
        self, memory_id: str, record_id: str, by: Writer, at: datetime, *, write_id: str | None = None
    ) -> Record:
        """Close the record (status forgotten); its versions stay in history. `write_id` is kept with the
        forgotten version, as a NewRecord's is."""
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


class AdapterFactory(Protocol):
    """How the gateway opens an adapter from its `[providers.NAME]` table.

    `options` are the table's adapter keys (with `base_url` and `timeout`); `client` the gateway's pooled
    HTTP client, the only way an adapter reaches a vendor over HTTP; `data_dir` a directory of this
    provider's own on the gateway's disk; `api_key` the value of `api_key_env`, or None. Each vendor
    package offers one as `factory`, and adapters/__init__.py names the package."""

    def __call__(
        self, options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path, api_key: str | None
    ) -> Awaitable[Provider]: ...


@runtime_checkable
class FindsWrites(Protocol):
    """An optional part of the contract: finding what a write left at the vendor, by its write id.

    A write whose call failed after it may have reached the vendor (a timeout, a lost answer, a 5xx: the
    error's `maybe_applied`) has an unknown outcome. The gateway looks it up here before it reports a
    failure and before it writes again, so a write that landed is reported written and never made twice.
    An adapter answers from the vendor's own state as of the call: a write the vendor applies only later is
    not found yet, which the gateway allows for by waiting for the provider's settle time (`write_settle`)
    before it treats "not found" as "not written". The local adapter's writes settle when its call ends.
    """

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version that the write `write_id` made in this memory (also once later versions superseded
        it), or None if no such write is there. `record_id`, given when the caller knows which record the
        write changed (revise, forget), lets the adapter look at that record alone."""
        ...
