"""What both Zep wires have in common: the kinds of graph object, the normalized object shape every
answer is read into, and the filter values a dialect spells in its own way.

Each dialect reads its answers into the v4 object shape (`episode_uuids`, `metadata`), so the rest of the
adapter reads one shape. Where memfed's fields travel differs by variant and kind (`Dialect.carrier`):
episodes carry a `metadata` object (v4: at most 10 keys); edges and nodes are read back without one in
both variants, so there memfed's keys ride in `attributes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Kind = Literal["edge", "node", "episode"]
KINDS: tuple[Kind, ...] = ("edge", "node", "episode")
SCOPE: dict[Kind, str] = {"edge": "edges", "node": "nodes", "episode": "episodes"}
Carrier = Literal["metadata", "attributes"]

METADATA_KEYS = 10  # v4 refuses an object whose metadata holds more keys
# The node a stated fact hangs from when it names no subject or object record: a fact in Zep is an
# edge between two nodes, and a node memfed invents per fact would read as a derived entity.
ANCHOR_NAME = "memfed"
ANCHOR_LABEL = "MemfedAnchor"


@dataclass(frozen=True)
class Graph:
    """A memory's Zep graph: `ref` is what paths take (v4 the graph UUID, v3 the graph_id)."""

    ref: str
    name: str


@dataclass(frozen=True)
class Task:
    uuid: str
    status: str  # pending | processing | succeeded | partial | failed
    error: str | None = None


@dataclass(frozen=True)
class Written:
    """What a create answered: the object (normalized) and, in v4, the task that processes it."""

    item: Mapping[str, Any]
    task: Task | None = None


@dataclass(frozen=True)
class DateCondition:
    field: str  # created_at | valid_at | invalid_at | expired_at
    operator: str  # eq ne gt lt gte lte is_null is_not_null
    value: datetime | None = None


@dataclass(frozen=True)
class SearchFilters:
    """The part of a recall Zep can judge itself. `date_all_of` is ANDed; `metadata_eq` pairs are ANDed
    (v4 only: v3 has no metadata filter and the adapter judges them after)."""

    date_all_of: tuple[DateCondition, ...] = ()
    metadata_eq: tuple[tuple[str, Any], ...] = ()
    node_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListFilters:
    """The part of a `filters` recall Zep can judge on a listing: the record types an episode listing may
    hold (`memfed_type`, v4 `metadata_filters`; v3 lists episodes unfiltered) and v4 metadata filter
    groups ANDed with it (`_pushdown`). Empty: no filter."""

    episode_types: tuple[str, ...] = ()
    metadata_groups: tuple[Mapping[str, Any], ...] = ()
    edge_dates: tuple[DateCondition, ...] = ()  # v4 `date_filters` (ANDed) on an edge listing
    edge_properties: tuple[Mapping[str, Any], ...] = ()  # v4 `property_filters` on an edge listing


@dataclass(frozen=True)
class NewEdge:
    fact: str
    name: str
    source: Mapping[str, Any]  # {"uuid": ...} or {"name": ..., "labels": [...]}
    target: Mapping[str, Any]
    valid_at: datetime | None
    invalid_at: datetime | None
    expired_at: datetime | None
    pack: Mapping[str, Any] = field(default_factory=dict)


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def normalized(item: Any, kind: Kind) -> dict[str, Any]:
    """A v3 or v4 object in the v4 shape; ValueError when it is not an object with a uuid."""
    if not isinstance(item, Mapping) or not isinstance(item.get("uuid"), str):
        raise ValueError(f"a {kind} without a uuid")
    out = dict(item)
    if "episode_uuids" not in out and isinstance(out.get("episodes"), list):
        out["episode_uuids"] = out["episodes"]
    out.setdefault("episode_uuids", [])
    out.setdefault("attributes", {})
    out.setdefault("metadata", {})
    for key in ("attributes", "metadata"):
        if not isinstance(out[key], Mapping):
            out[key] = {}
    return out


def items_of(body: Any, kind: Kind, key: str = "items") -> list[dict[str, Any]]:
    raw = body.get(key) if isinstance(body, Mapping) else body
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ValueError(f"no {key} array")
    return [normalized(i, kind) for i in raw]
