"""Wire models of answers: what gateway/api/render.py builds, stated for /openapi.json.

They are never used to build an answer (render.py does, for one reader at a time); they describe it, and
tests/e2e/test_openapi_fuzz.py checks every answer of a live server against them. A field a renderer may
leave out is optional here; `extra="allow"` where the chapter lets a server add fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FileOut(Open):
    id: str
    name: str
    media_type: str
    bytes: int = Field(ge=0)


class PartOut(Open):
    """A part as the chapter shows it: an extension part's own keys sit beside `type`."""

    type: str
    text: str | None = None
    file: FileOut | None = None
    role: Literal["user", "assistant", "system", "tool"] | None = None
    text_source: Literal["stated", "derived"] | None = None


class ReferenceOut(Open):
    record_id: str
    available: bool
    memory_id: str | None = None
    rel: str | None = None


class TimeOut(Open):
    valid_from: str | None
    valid_to: str | None
    written_at: str | None
    invalidated_at: str | None


class WriterOut(Open):
    kind: str
    id: str
    type: str | None = None
    on_behalf_of: str | None = None
    consolidation_id: str | None = None


class FollowsOut(Open):
    kind: str
    id: str
    name: str


class RecordOut(Open):
    id: str
    object: Literal["memory.record"]
    memory_id: str
    type: str
    title: str | None
    content: list[PartOut]
    attributes: dict[str, Any]
    version: int = Field(ge=1)
    status: Literal["active", "superseded", "forgotten"]
    supersedes: int | None
    time: TimeOut
    written_by: WriterOut
    references: list[ReferenceOut]
    trust: Literal["untrusted"]
    follows: FollowsOut | None = None


class RecordList(Open):
    object: Literal["list"]
    data: list[RecordOut]
    next: str | None


class Count(Open):
    count: int | None = Field(ge=0)


class MemoryOut(Open):
    id: str
    object: Literal["memory"]
    name: str
    description: str
    parent_id: str | None
    ancestors: list[Any]
    restricted: bool
    provider: str
    privileges: list[Literal["read", "write", "create", "delete"]]
    records: Count
    children: Count


class MemoryList(Open):
    object: Literal["list"]
    data: list[MemoryOut]
    next: str | None


class PlaceOut(Open):
    id: str
    name: str
    description: str
    records: Count


class PlaceRef(Open):
    id: str
    name: str | None


class HitOut(Open):
    record: RecordOut
    memory: PlaceRef
    score: float | None  # null where no ranking produced the hit (a named or free query's records)
    why: list[Any]


class RecallOut(Open):
    object: Literal["memory.recall"]
    results: list[HitOut]
    children: list[PlaceOut]
    degraded: list[str]
    abstain: bool
    parent: PlaceOut | None = None


class ErasureOut(Open):
    object: Literal["memory.erasure"]
    memory_id: str
    erased: list[str]
    unreachable: list[str]


class KeyRef(Open):
    id: str


class MemberOut(Open):
    id: str
    object: Literal["member"]
    name: str
    type: Literal["human", "agent"]
    admin: bool
    principal: str
    groups: list[str]
    created_at: int
    keys: list[KeyRef] | None = None


class KeyOut(Open):
    id: str
    object: Literal["api_key"]
    member_id: str
    key: str


class Deleted(Open):
    id: str
    object: str
    deleted: Literal[True]


class GroupOut(Open):
    id: str
    object: Literal["group"]
    name: str
    principal: str
    members: list[str]


class GrantOut(Open):
    id: str
    object: Literal["memory.grant"]
    memory_id: str
    principal: str
    privileges: list[Literal["read", "write", "create", "delete"]]
    implicit: bool


class GrantList(Open):
    object: Literal["list"]
    data: list[GrantOut]
    next: str | None


class StoredFileOut(Open):
    id: str
    object: Literal["file"]
    filename: str
    bytes: int = Field(ge=0)
    media_type: str
    purpose: str
    created_at: int


class SnapshotOut(Open):
    id: str
    object: Literal["memory.snapshot"]
    memory_id: str
    name: str
    message: str
    at: str | None


class SnapshotList(Open):
    object: Literal["list"]
    data: list[SnapshotOut]
    next: str | None


class HarnessOut(Open):
    id: str
    object: Literal["harness"]
    name: str
    agent_member_id: str
    principal: str
    default_memory_id: str | None
    observe: bool
    created_at: int
    updated_at: int
    deleted: bool | None = None


class HarnessList(Open):
    object: Literal["list"]
    data: list[HarnessOut]
    next: str | None


class AcknowledgementOut(Open):
    """A write's answer to a caller that may write but not read: which record, never what it says."""

    object: Literal["memory.record.acknowledgement"]
    id: str
    memory_id: str
    version: int = Field(ge=1)
    status: Literal["active", "superseded", "forgotten"]


class WrittenOut(RootModel[RecordOut | AcknowledgementOut]):
    """remember, revise, forget: the record (render.written_json), or its acknowledgement."""


class MemoryDeleted(Open):
    id: str
    object: Literal["memory"]
    deleted: Literal[True]
    memories_deleted: int = Field(ge=0)
    unseen_memories_deleted: bool


class GrantDeleted(GrantOut):
    deleted: Literal[True]


class GraphNode(Open):
    record: RecordOut
    memory: PlaceRef


class EdgeEnd(Open):
    record_id: str
    memory_id: str | None = None


class GraphEdge(Open):
    """An edge to a memory the reader may not read names no memory and no `rel` (api/graph.py)."""

    from_: EdgeEnd = Field(alias="from")
    to: EdgeEnd
    available: bool
    rel: str | None = None


class GraphOut(Open):
    object: Literal["memory.graph"]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool
    degraded: list[str]


class RatificationOut(Open):
    object: Literal["memory.ratification"]
    memory_id: str
    record_id: str
    decision: Literal["approve", "reject"]
    record: RecordOut | None


class OperationOut(Open):
    object: Literal["memory.operation"]
    operation: str
    memory_id: str
    record_id: str
    type: str
    result: dict[str, Any]
    record: RecordOut | AcknowledgementOut | None
