"""The NDJSON form of a memory's records: one record a line, with every version, for export and import.

A line is `{"id": old id, "memory_id": the memory it was exported from, "versions": [...]}`, oldest
version first. Each version is the wire record (§4) less what belongs to one reader (`object`,
`trust`, the `available` flag): this is an administrator's export, so references keep their memory
id and `rel` whoever could read them. Times keep their microseconds, which the wire form rounds to
milliseconds, so that an export of an import equals the export it came from.

Parsing validates a whole file before anything is written: a bad line is reported by its number.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from adapters.base import FileRef, Follows, Part, Record, RecordTime, Reference, Writer, part_to_json, writer_to_json
from adapters.writer_format import checked_writer
from gateway.base import limits
from gateway.base.clock import rfc3339_or_none
from gateway.base.errors import ApiError
from gateway.base.limits import Attributes, Instant

MEDIA_TYPE = "application/x-ndjson"


# --------------------------------------------------------------------------- records -> lines


def stamp(moment: datetime | None) -> str | None:
    """Microseconds: an imported version keeps the exact instant it was written at."""
    return rfc3339_or_none(moment, "microseconds")


def version_json(record: Record) -> dict[str, Any]:
    """One version as an export carries it."""
    out: dict[str, Any] = {
        "type": record.type,
        "title": record.title,
        "content": [part_to_json(p, nest_extra=False) for p in record.content],
        "attributes": dict(record.attributes),
        "version": record.version,
        "status": record.status,
        "supersedes": record.supersedes,
        "time": {
            "valid_from": stamp(record.time.valid_from),
            "valid_to": stamp(record.time.valid_to),
            "written_at": stamp(record.time.written_at),
            "invalidated_at": stamp(record.time.invalidated_at),
        },
        "written_by": writer_to_json(record.written_by),
        "references": [{"memory_id": r.memory_id, "record_id": r.record_id, "rel": r.rel}
                       for r in record.references],
    }
    if record.follows is not None:
        out["follows"] = {"kind": record.follows.kind, "id": record.follows.id, "name": record.follows.name}
    return out


def line_json(memory_id: str, record_id: str, versions: Iterable[Record]) -> dict[str, Any]:
    return {"id": record_id, "memory_id": memory_id, "versions": [version_json(v) for v in versions]}


def dumps(line: Mapping[str, Any]) -> str:
    """One line of the file, newline included; non-ASCII kept as is (NDJSON is UTF-8)."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


# --------------------------------------------------------------------------- lines -> records


@dataclass(frozen=True)
class Exported:
    """One record of a file: where it came from (`memory_id` may be unknown), its versions, its line."""

    memory_id: str | None
    id: str
    versions: tuple[Record, ...]
    line: int = 0


class LineError(ValueError):
    """A line that cannot be imported; `line` counts from 1."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _File(_Model):
    id: str = Field(min_length=1, max_length=200)
    name: str
    media_type: str = Field(min_length=1)
    bytes: int = Field(ge=0)


class _Part(BaseModel):
    # Extension parts carry keys of their own, kept unchanged.
    model_config = ConfigDict(extra="allow")
    type: str = Field(min_length=1)
    text: str | None = None
    file: _File | None = None
    role: str | None = None
    text_source: str | None = None


class _Writer(_Model):
    kind: str = Field(min_length=1)
    id: str = Field(min_length=1)
    type: str | None = None
    on_behalf_of: str | None = None
    consolidation_id: str | None = None

    @model_validator(mode="after")
    def _as_memfed_stamps_it(self) -> _Writer:
        # A writer is shown to agents beside its record: a file may carry only what memfed itself stamps.
        self.writer()
        return self

    def writer(self) -> Writer:
        return checked_writer(self.kind, self.id, self.type, self.on_behalf_of, self.consolidation_id)


class _Reference(_Model):
    memory_id: str = Field(min_length=1, max_length=200)
    record_id: str = Field(min_length=1, max_length=200)
    rel: str | None = None


class _Time(_Model):
    written_at: Instant
    valid_from: Instant | None = None
    valid_to: Instant | None = None
    invalidated_at: Instant | None = None


class _Follows(_Model):
    kind: str
    id: str
    name: str


class _Version(_Model):
    type: str = Field(min_length=1)
    title: str | None = None
    content: list[_Part] = Field(default_factory=list)
    attributes: Attributes = Field(default_factory=dict)
    version: int = Field(ge=1)
    status: Literal["active", "superseded", "forgotten"]
    supersedes: int | None = None
    time: _Time
    written_by: _Writer
    references: list[_Reference] = Field(default_factory=list)
    follows: _Follows | None = None


class _Line(_Model):
    id: str = Field(min_length=1, max_length=200)
    memory_id: str | None = Field(default=None, min_length=1, max_length=200)
    versions: list[_Version] = Field(min_length=1)

    @model_validator(mode="after")
    def _a_chain(self) -> _Line:
        if self.versions[0].status == "forgotten":
            raise ValueError("the first version cannot be a forgotten one: forget closes a record that exists")
        for before, after in zip(self.versions, self.versions[1:], strict=False):
            if after.version <= before.version:
                raise ValueError("versions must be in increasing order")
            if _utc(after.time.written_at) < _utc(before.time.written_at):
                raise ValueError(f"version {after.version} is written before version {before.version}")
        return self


def _utc(moment: datetime) -> datetime:
    # A time without a zone is read as UTC, as the providers read it.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _opt(moment: datetime | None) -> datetime | None:
    return None if moment is None else _utc(moment)


def _record(line: _Line, v: _Version) -> Record:
    parts = tuple(
        Part(p.type, text=p.text, role=p.role, text_source=p.text_source,
             file=FileRef(p.file.id, p.file.name, p.file.media_type, p.file.bytes) if p.file else None,
             extra=dict(p.model_extra or {}))
        for p in v.content
    )
    return Record(
        id=line.id, memory_id=line.memory_id or "", type=v.type, content=parts,
        written_by=v.written_by.writer(),
        time=RecordTime(_utc(v.time.written_at), _opt(v.time.valid_from), _opt(v.time.valid_to),
                        _opt(v.time.invalidated_at)),
        version=v.version, status=v.status, supersedes=v.supersedes, title=v.title,
        attributes=v.attributes, references=tuple(Reference(r.memory_id, r.record_id, r.rel) for r in v.references),
        follows=Follows(v.follows.kind, v.follows.id, v.follows.name) if v.follows else None,
    )


def parse_line(number: int, text: str) -> Exported:
    try:
        raw = limits.loads(text)
    except ApiError as error:  # nested past the limit
        raise LineError(number, error.message) from None
    except (ValueError, UnicodeEncodeError):
        raise LineError(number, "not valid JSON") from None
    if not isinstance(raw, dict):
        raise LineError(number, "a line is one JSON object")
    if (problem := limits.plain_problem(raw)) is not None:
        raise LineError(number, f"{problem[0]} {problem[1]}")
    try:
        line = _Line.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise LineError(number, f"{where}: {first['msg']}" if where else first["msg"]) from None
    return Exported(line.memory_id, line.id, tuple(_record(line, v) for v in line.versions), number)


def parse_lines(lines: Iterable[str | bytes]) -> list[Exported]:
    """Every record of a file, or a LineError for the first bad line. Blank lines are skipped; a record
    id given twice is an error, since the second would be written as a second record."""
    out: list[Exported] = []
    seen: dict[tuple[str | None, str], int] = {}
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise LineError(number, "not UTF-8") from None
        if not text.strip():
            continue
        exported = parse_line(number, text)
        key = (exported.memory_id, exported.id)
        if key in seen:
            raise LineError(number, f"record {exported.id} was already given on line {seen[key]}")
        seen[key] = number
        out.append(exported)
    return out
