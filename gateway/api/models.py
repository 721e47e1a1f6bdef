"""Wire models: what each route accepts. They validate requests and are the source of /openapi.json."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from adapters.base import FilterOp
from gateway.base.limits import Attributes, Instant, instant

Privilege = Literal["read", "write", "create", "delete"]
MemberType = Literal["human", "agent"]
Include = Literal["active", "all"]
Name = Field(min_length=1, max_length=300)
# What policies.access.principal_error accepts: member, group or an x.-prefixed kind, a colon, an id.
PRINCIPAL_PATTERN = r"^(member|group|x\.[^:]+):.+$"
Id = Field(min_length=1, max_length=200)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


# ---------------------------------------------------------------- members, groups, keys


class CreateMember(Strict):
    name: str = Name
    type: MemberType
    admin: bool = False


class CreateGroup(Strict):
    name: str = Name


# ---------------------------------------------------------------- the tree


class CreateMemory(Strict):
    name: str = Name
    description: str = Field(default="", max_length=4000)
    parent_id: str | None = Field(default=None, min_length=1, max_length=200)
    restricted: bool = False
    provider: str | None = Field(default=None, min_length=1, max_length=100)


class UpdateMemory(Strict):
    """Only the fields given change; `parent_id: null` makes the memory a root (admins only)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})
    # None is the "not given" default; null is refused (the validator below), so the schema omits it.
    name: Annotated[str, Field(min_length=1, max_length=300)] | SkipJsonSchema[None] = None
    description: str | None = Field(default=None, max_length=4000)
    restricted: bool | SkipJsonSchema[None] = None
    parent_id: str | None = Field(default=None, min_length=1, max_length=200)
    provider: str | None = Field(default=None, min_length=1, max_length=100)

    @model_validator(mode="after")
    def _not_empty(self) -> UpdateMemory:
        if not self.model_fields_set:
            raise ValueError("give at least one of name, description, restricted, parent_id")
        for key in ("name", "restricted"):
            if key in self.model_fields_set and getattr(self, key) is None:
                raise ValueError(f"{key} cannot be null")
        return self


class Page(Strict):
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=500)


class ListMemories(Page):
    cursor: str | None = Field(default=None, max_length=2000)  # a subtree's cursor names the path down to it
    parent: str | None = Field(default=None, min_length=1, max_length=200)
    ancestor: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _one_of(self) -> ListMemories:
        if self.parent and self.ancestor:
            raise ValueError("give parent or ancestor, not both")
        return self


class CreateGrant(Strict):
    principal: str = Field(min_length=3, max_length=200, pattern=PRINCIPAL_PATTERN,
                           description="<kind>:<id>, e.g. member:mbr_…")
    privileges: list[Privilege] = Field(min_length=1, max_length=4)


# ---------------------------------------------------------------- records


class FileIn(BaseModel):
    """A file part names an uploaded file by id; name, media_type and bytes come from the file store."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=200)


class PartIn(BaseModel):
    """`text`, `file`, or an `x.`-prefixed part carried unchanged."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(min_length=1, max_length=100, pattern=r"^(text|file|x\..+)$")
    text: str | None = Field(default=None, max_length=200_000)
    file: FileIn | None = None
    role: Literal["user", "assistant", "system", "tool"] | None = None
    text_source: Literal["stated", "derived"] | None = None

    @model_validator(mode="after")
    def _shape(self) -> PartIn:
        if self.type == "text":
            if self.text is None:
                raise ValueError("a text part needs text")
            if self.file is not None:
                raise ValueError("a text part carries no file")
        elif self.type == "file":
            if self.file is None:
                raise ValueError("a file part needs file.id")
        elif not self.type.startswith("x."):
            raise ValueError("a part's type is text, file or x.-prefixed")
        return self


class ReferenceIn(Strict):
    memory_id: str = Id
    record_id: str = Id
    rel: str | None = Field(default=None, min_length=1, max_length=100)


class TimeIn(BaseModel):
    """Validity as the writer states it. written_at and invalidated_at are the server's and not read."""

    model_config = ConfigDict(extra="ignore")
    valid_from: Instant | None = None
    valid_to: Instant | None = None


Content = str | list[PartIn]


class RecordFields(Strict):
    title: str | None = Field(default=None, max_length=300)
    content: Content | None = None
    attributes: Attributes | None = None
    references: list[ReferenceIn] | None = Field(default=None, max_length=100)
    time: TimeIn | None = None
    written_by: Any = Field(default=None, description="Ignored: the server stamps the writer.")

    @field_validator("content")
    @classmethod
    def _parts_limit(cls, value: Content | None) -> Content | None:
        if isinstance(value, list) and len(value) > 100:
            raise ValueError("at most 100 parts")
        if isinstance(value, str) and len(value) > 200_000:
            raise ValueError("content is too long")
        return value


class Remember(RecordFields):
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["title"], "properties": {"title": {"type": "string", "minLength": 1}}},
        {"required": ["content"], "properties": {"content": {"minLength": 1, "minItems": 1}}},
    ]})
    type: str = Field(default="note", min_length=1, max_length=100)

    @model_validator(mode="after")
    def _something(self) -> Remember:
        if not self.title and not self.content:
            raise ValueError("a record needs a title or content")
        return self


class Revise(RecordFields):
    type: str | None = Field(default=None, min_length=1, max_length=100)


class ListRecords(Page):
    type: str | None = Field(default=None, max_length=100)
    include: Include = "active"
    as_of: Instant | None = None


class GetRecord(Strict):
    as_of: Instant | None = None


class Erase(Strict):
    record_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(min_length=1, max_length=1000)


class Snapshot(Strict):
    name: str = Name
    message: str = Field(default="", max_length=4000)


# ---------------------------------------------------------------- recall and graph


class ConditionIn(Strict):
    field: str = Field(min_length=1, max_length=200,
                       pattern=r"^(type|attributes\..+|time\.(valid_from|valid_to|written_at|invalidated_at))$")
    op: FilterOp = "eq"
    value: Any = None

    @field_validator("field")
    @classmethod
    def _field(cls, value: str) -> str:
        if value == "type" or (value.startswith("attributes.") and len(value) > 11):
            return value
        if value in ("time.valid_from", "time.valid_to", "time.written_at", "time.invalidated_at"):
            return value
        raise ValueError("a filter field is type, attributes.<name> or time.<valid_from|valid_to|written_at>")

    @model_validator(mode="after")
    def _value(self) -> ConditionIn:
        if self.op == "in":
            if not isinstance(self.value, list):
                raise ValueError("op in takes a list value")
            if len(self.value) > 1000:
                raise ValueError("op in takes at most 1000 values")
            values = self.value
        elif isinstance(self.value, list | dict):
            raise ValueError(f"op {self.op} takes a single value")
        else:
            values = [self.value]
        if any(isinstance(v, list | dict) for v in values):
            raise ValueError("a filter value is a string, number, boolean or null, not a list or object")
        if self.field.startswith("time."):
            for v in values:
                _time_value(v)
        return self


def _time_value(value: Any) -> None:
    """A time.* filter compares instants: its value is an RFC 3339 date-time (or null for "not set")."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValueError("a time.* filter value is an RFC 3339 date-time string")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("a time.* filter value is an RFC 3339 date-time string") from None
    instant(moment)


class Recall(Strict):
    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["query"]}, {"required": ["text"]},
                                                           {"required": ["filters"]}]})
    # None is "not given"; a signal given as null is not a signal, so the schema does not offer null.
    query: Annotated[str, Field(min_length=1, max_length=4000)] | SkipJsonSchema[None] = None
    text: Annotated[str, Field(min_length=1, max_length=4000)] | SkipJsonSchema[None] = None
    filters: ConditionIn | list[ConditionIn] | SkipJsonSchema[None] = None
    types: list[str] | None = Field(default=None, max_length=50)
    as_of: Instant | None = None
    include: Include = "active"
    depth: int | None = Field(default=None, ge=0, le=1000)
    limit: int | None = Field(default=None, ge=1, le=200)
    # Seconds the caller will wait: shortens the gateway's `[recall] deadline`, never lengthens it.
    timeout: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)

    @model_validator(mode="after")
    def _a_signal(self) -> Recall:
        for name in ("query", "text", "filters"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; leave it out")
        if not (self.query or self.text or self.filters):
            raise ValueError("give at least one of query, text or filters")
        return self

    def conditions(self) -> list[ConditionIn]:
        if self.filters is None:
            return []
        return self.filters if isinstance(self.filters, list) else [self.filters]


class Graph(Strict):
    around: str | None = Field(default=None, min_length=1, max_length=200)
    hops: int = Field(default=1, ge=0, le=3)
    types: list[str] | None = Field(default=None, max_length=50)
    limit: int = Field(default=200, ge=1, le=1000)
