"""Wire models of the operator's answers (discovery, capability documents, types, access, audit,
migration and import), stated for /openapi.json like gateway/api/responses.py and never used to build one."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.api.responses import Open

Privilege = Literal["read", "write", "create", "delete"]


class Implementation(Open):
    name: str
    version: str


class DiscoveryOut(Open):
    object: Literal["uhp.discovery"]
    protocol: Literal["uhp"]
    versions: list[str]
    default_version: str
    conformance_class: str
    capabilities: dict[str, bool]
    implementation: Implementation


class ProviderOut(Open):
    """A capability document (§3): the chapter's keys as the adapter declares them, memfed's under x.memfed."""

    id: str
    x_memfed: dict[str, Any] = Field(alias="x.memfed")


class ProviderList(Open):
    object: Literal["list"]
    data: list[ProviderOut]
    next: None


class TypeOut(Open):
    type: str
    description: str
    schema_: dict[str, Any] = Field(alias="schema")
    operations: list[Any]


class TypeList(Open):
    """`degraded` names the providers whose types could not be read."""

    object: Literal["list"]
    data: list[TypeOut]
    next: None
    degraded: list[str]


class AccessGrant(Open):
    grant_id: str
    memory_id: str
    principal: str
    via_group: bool
    implicit: bool
    privileges: list[Privilege]


class AccessOut(Open):
    object: Literal["memory.access"]
    memory_id: str
    principal: str
    groups: list[str]
    privileges: list[Privilege]
    grants: list[AccessGrant]
    inherited_from_above_reach: bool
    cutoff_at: str | None
    inheritance_cut: bool
    path: list[str]
    reasons: dict[Privilege, str]


class AuditEntry(Open):
    seq: int
    at: str
    request_id: str | None
    principal: str | None
    groups: list[str]
    operation: str
    memory_id: str | None
    privilege: str | None
    decision: Literal["allow", "deny"]
    reason: str
    prev_hash: str
    hash: str


class AuditList(Open):
    object: Literal["list"]
    data: list[AuditEntry]
    next: str | None


class VerificationOut(Open):
    object: Literal["audit.verification"]
    ok: bool
    checked: int = Field(ge=0)
    broken_at: int | None
    problem: str | None
    sealed_from: int | None


class MovedMemory(Open):
    id: str
    source: str
    records: int = Field(ge=0)
    dropped_leftovers: int = Field(ge=0)
    adopted: int = Field(ge=0)
    erased: int = Field(ge=0)
    switched: bool
    purged_source: bool


class MigrationOut(Open):
    id: str
    object: Literal["memory.migration"]
    memory_id: str
    to: str
    recursive: bool
    status: str
    resumed: bool
    started_at: int
    finished_at: int | None
    copied: int = Field(ge=0)
    versions_written: int = Field(ge=0)
    passes: int = Field(ge=0)
    source_kept: bool
    memories: list[MovedMemory]
    degraded: list[str]
    error: str


class MigrationProgressOut(Open):
    """The last migration this gateway started for the memory: `report` once it completed, `error`
    (an error object) once it failed."""

    object: Literal["memory.migration.progress"]
    memory_id: str
    to: str
    recursive: bool
    state: Literal["running", "completed", "failed"]
    passes: int = Field(ge=0)
    done: int = Field(ge=0)
    total: int | None
    started_at: str
    finished_at: str | None
    report: MigrationOut | None
    error: dict[str, Any] | None


class ImportOut(Open):
    object: Literal["memory.import"]
    memory_id: str
    imported: int = Field(ge=0)
    skipped: int = Field(ge=0)
    aliases: int = Field(ge=0)
    versions_written: int = Field(ge=0)
    degraded: list[str]


class LiveOut(Open):
    status: Literal["ok"]


class ReadyOut(Open):
    """`checks` names each check's state and, under `providers`, each provider's breaker state."""

    status: str
    checks: dict[str, Any]
    progress: int | None = None  # while loading: the share of the tree read so far, in percent
