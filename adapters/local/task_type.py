"""The embedded provider's registered type (§8): `x.task`, an item on a task board.

A task is a record like any other (versioned, under its memory's access, found by recall); the type
adds attributes that follow a schema and three operations. Every write of an `x.task` has its
attributes checked against the schema, and its text projection ("status open, due 2026-10-09,
assignee Dana") is indexed with the record's own words, so `recall` with `text: "Dana"` finds it
without the projection ever being stored in the record: what a writer stated stays exactly as stated.

The schemas are pydantic models, so the JSON Schema the listing shows and the check on a write are
one definition and cannot drift apart. Values are checked in pydantic's strict JSON mode: a date is
a "YYYY-MM-DD" string, as it would arrive on the wire, never a number taken for a timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import date, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.base import Provider, ProviderRejected, Record, Revision, Writer
from adapters.local import _sql as sql
from adapters.operations import OperationInfo, OperationResult, TypeInfo, UnknownOperation

TASK_TYPE = "x.task"
M = TypeVar("M", bound=BaseModel)


class TaskAttributes(BaseModel):
    """The attributes of an `x.task`."""

    model_config = ConfigDict(extra="forbid", title="x.task attributes")

    status: Literal["open", "done"] = "open"
    due: date | None = None
    assignee: str | None = Field(default=None, min_length=1, max_length=200)


class NoInput(BaseModel):
    model_config = ConfigDict(extra="forbid", title="no input")


class RescheduleInput(BaseModel):
    model_config = ConfigDict(extra="forbid", title="reschedule input")

    due: date


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


TASK = TypeInfo(
    type=TASK_TYPE,
    description="An item on a task board: something to do, who does it and by when.",
    schema=_schema(TaskAttributes),
    text="the title, then status, due date and assignee, as one line, for recall",
    operations=(
        OperationInfo("complete", "Mark the task done (a new version with status done).", _schema(NoInput),
                      "write"),
        OperationInfo("reschedule", "Move the task's due date (a new version).", _schema(RescheduleInput),
                      "write"),
        OperationInfo("summary", "The task as one line, and whether it is overdue.", _schema(NoInput), "read"),
    ),
)
TYPES: tuple[TypeInfo, ...] = (TASK,)
_BY_NAME = {info.type: info for info in TYPES}


def _validate(model: type[M], value: Mapping[str, Any], what: str) -> M:
    try:
        return model.model_validate_json(json.dumps(dict(value)), strict=True)
    except (TypeError, ValueError) as exc:  # ValidationError is a ValueError; TypeError: not JSON
        raise ProviderRejected(_message(exc, what)) from exc


def _message(exc: Exception, what: str) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{what}{'.' + where if where else ''}: {first['msg']}"
    return f"{what}: {exc}"


def check(type_: str, attributes: Mapping[str, Any]) -> None:
    """Refuse attributes that do not follow a registered type's schema. A type this provider does not
    register (another `x.` type) is carried unchanged, as §4.1 requires."""
    if type_ == TASK_TYPE:
        _validate(TaskAttributes, attributes, "attributes")


# --------------------------------------------------------------------------- the text projection


def attribute_line(record: Record) -> str | None:
    """The words a task's attributes add to its text projection; None for any other type."""
    if record.type != TASK_TYPE:
        return None
    attrs = record.attributes
    pieces = [f"{key} {attrs[key]}" for key in ("status", "due", "assignee") if attrs.get(key) is not None]
    return ", ".join(pieces) or None


def projection(record: Record) -> str:
    """The one line §8 says recall finds a task by: its title (or how its text begins), then the rest."""
    name = record.title or next((p.text for p in record.content if p.text), "") or ""
    line = attribute_line(record)
    return " — ".join(piece for piece in (name.splitlines()[0] if name else "", line) if piece)


def searchable(record: Record) -> tuple[str, str]:
    """(title, body) for the full-text index: the record's own words, and for a registered type its
    attribute line after them (the title is in its own column already, so it is not repeated)."""
    title, body = sql.searchable(record)
    line = attribute_line(record)
    if line:
        body = f"{body}\n{line}" if body else line
    return title, body


# --------------------------------------------------------------------------- operations

Handler = Callable[[Provider, Record, Mapping[str, Any], Writer, datetime], Awaitable[OperationResult]]


async def _complete(provider: Provider, record: Record, input: Mapping[str, Any], by: Writer,
                    at: datetime) -> OperationResult:
    _validate(NoInput, input, "input")
    if record.attributes.get("status") == "done":
        return OperationResult({"status": "done", "changed": False})
    return await _set(provider, record, {"status": "done"}, by, at)


async def _reschedule(provider: Provider, record: Record, input: Mapping[str, Any], by: Writer,
                      at: datetime) -> OperationResult:
    due = _validate(RescheduleInput, input, "input").due.isoformat()
    if record.attributes.get("due") == due:
        return OperationResult({"due": due, "changed": False})
    return await _set(provider, record, {"due": due}, by, at)


async def _summary(provider: Provider, record: Record, input: Mapping[str, Any], by: Writer,
                   at: datetime) -> OperationResult:
    _validate(NoInput, input, "input")
    attrs = record.attributes
    due = _date_or_none(attrs.get("due"))
    status = attrs.get("status", "open")
    return OperationResult({
        "summary": projection(record),
        "status": status,
        "due": due.isoformat() if due else None,
        "assignee": attrs.get("assignee"),
        "overdue": bool(due and status != "done" and due < sql.utc(at).date()),
    })


async def _set(provider: Provider, record: Record, changes: Mapping[str, Any], by: Writer,
               at: datetime) -> OperationResult:
    attributes = {**record.attributes, **changes}
    written = await provider.revise(record.memory_id, record.id,
                                    Revision(written_by=by, written_at=at, attributes=attributes))
    return OperationResult({**changes, "changed": True}, written)


_HANDLERS: dict[str, Handler] = {"complete": _complete, "reschedule": _reschedule, "summary": _summary}


async def operate(provider: Provider, memory_id: str, record_id: str, name: str, input: Mapping[str, Any],
                  by: Writer, at: datetime) -> OperationResult:
    """Run operation `name` on the current version of the record. A write operation on a forgotten
    record is refused: it would bring the record back as a side effect of, say, completing it."""
    record = await provider.get(memory_id, record_id)
    info = _BY_NAME.get(record.type)
    operation = info.operation(name) if info else None
    if operation is None:
        raise UnknownOperation(f"records of type {record.type!r} have no operation {name!r}")
    if operation.requires == "write" and record.status == "forgotten":
        raise ProviderRejected("the record is forgotten; revise it first to run a write operation on it")
    return await _HANDLERS[name](provider, record, input, by, at)


def _date_or_none(value: Any) -> date | None:
    # Attributes written before the schema was checked may hold anything; a summary must still answer.
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
