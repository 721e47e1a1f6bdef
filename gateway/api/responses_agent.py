"""Wire models of the agent surface's answers (observe, jobs, prime, harnesses, named queries,
consolidation runs), stated for /openapi.json like gateway/api/responses.py and never used to build one."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from gateway.api.responses import AcknowledgementOut, Open, RecallOut, RecordOut

Privilege = Literal["read", "write", "create", "delete"]


class JobRef(Open):
    id: str
    status: str


class ObservationOut(Open):
    """201 with the episodes written, or 202 with no records and the job that will carry them."""

    object: Literal["memory.observation"]
    memory_id: str
    records: list[RecordOut | AcknowledgementOut]
    job: JobRef | None


class JobOut(Open):
    """`records` is null when the provider could not be read; `degraded` then says why."""

    id: str
    object: Literal["memory.job"]
    memory_id: str
    status: str
    episodes: int = Field(ge=0)
    record_ids: list[str]
    records: list[RecordOut] | None
    error: str | None
    created_at: int
    updated_at: int
    degraded: list[str] | None = None


class Placement(Open):
    id: str
    placed: bool
    tokens: int = Field(ge=0)
    records_placed: int = Field(ge=0)
    records_left_out: int = Field(ge=0)


class _Primed(Open):
    text: str
    tokenizer: str
    tokens: int = Field(ge=0)
    budget: int
    records_placed: int = Field(ge=0)
    records_left_out: int = Field(ge=0)
    memories: list[Placement]


class PrimeOut(_Primed):
    object: Literal["memory.prime"]
    memory_id: str


class HarnessPrimeOut(_Primed):
    object: Literal["harness.prime"]
    harness_id: str
    principal: str
    degraded: list[str]


class HarnessMemory(Open):
    id: str
    name: str
    description: str
    privileges: list[Privilege]
    default: bool


class HarnessMemoriesOut(Open):
    object: Literal["harness.memories"]
    harness_id: str
    principal: str
    default_memory_id: str | None
    observe: bool
    data: list[HarnessMemory]


class TurnOut(Open):
    """200 with `observed: false` and the reason (observe off, no default memory), else an observation
    of the default memory: 201 with the episode, 202 with the job."""

    object: Literal["harness.turn"]
    harness_id: str
    observed: bool
    reason: str | None = None
    memory_id: str | None = None
    records: list[RecordOut | AcknowledgementOut] | None = None
    job: JobRef | None = None


class QueryOut(Open):
    object: Literal["memory.query"]
    memory_id: str
    name: str
    description: str
    params: dict[str, Any]
    requires: Privilege
    language: str
    body: str
    created_by: str
    created_at: int
    updated_by: str
    updated_at: int


class QueryList(Open):
    object: Literal["list"]
    data: list[QueryOut]
    next: str | None


class QueryDeleted(QueryOut):
    deleted: Literal[True]


class QueryRows(Open):
    """A query whose provider answers rows rather than records."""

    object: Literal["memory.query_result"]
    columns: list[str]
    rows: list[list[Any]]
    degraded: list[str]


class QueryResultOut(RootModel[RecallOut | QueryRows]):
    """Records in the shape of a recall, or rows (api/queries.py `answer`)."""


class ProviderWriter(Open):
    kind: Literal["provider"]
    id: str


class ChangeCounts(Open):
    created: int = Field(ge=0)
    superseded: int = Field(ge=0)
    forgotten: int = Field(ge=0)


class Budget(Open):
    limit: int | None
    unit: str
    exhausted: bool


class RunOut(Open):
    id: str
    object: Literal["memory.consolidation"]
    memory_id: str
    status: Literal["running", "completed", "failed"]
    trigger: str
    started_at: int
    finished_at: int | None
    read: dict[str, Any]
    changes: ChangeCounts
    usage: dict[str, Any]
    budget: Budget
    written_by: ProviderWriter
    error: str


class RunList(Open):
    object: Literal["list"]
    data: list[RunOut]
    next: str | None


class ChangeOut(Open):
    object: Literal["memory.consolidation.change"]
    run_id: str
    record_id: str
    kind: Literal["created", "superseded", "forgotten"]
    version: int
    reverted: bool


class ChangeList(Open):
    object: Literal["list"]
    data: list[ChangeOut]
    next: str | None
