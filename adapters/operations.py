"""Extension types and their operations (UHP Memories §8): an optional part of the provider contract.

A provider that keeps more than the core types (a task board, a calendar) describes each type it
registers (its attribute schema, how its text projection for recall is made, and the operations it
offers, each with the privilege it needs) and runs those operations on one record at a time.

This is a separate Protocol rather than more methods on `Provider`: most providers register no type,
and the gateway asks `isinstance(provider, TypedProvider)` before it offers the routes. The gateway
checks the privilege an operation `requires` before it calls `operate`; the provider never sees grants.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from adapters.base import ProviderRejected, Record, Writer

Requires = Literal["read", "write"]
REQUIRES: tuple[Requires, ...] = ("read", "write")


class UnknownOperation(ProviderRejected):
    """The record's type has no operation of that name (or the record's type is not registered)."""


@dataclass(frozen=True)
class OperationInfo:
    """One operation of a type: its `input` is a JSON Schema for the object it takes."""

    name: str
    description: str
    input: Mapping[str, Any]
    requires: Requires

    def document(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input": copy.deepcopy(dict(self.input)),
                "requires": self.requires}


@dataclass(frozen=True)
class TypeInfo:
    """A registered type: `schema` is the JSON Schema its attributes follow; `text` says, for a reader,
    how the text projection recall searches is made from a record of this type."""

    type: str
    description: str
    schema: Mapping[str, Any]
    text: str
    operations: tuple[OperationInfo, ...] = ()

    def operation(self, name: str) -> OperationInfo | None:
        return next((op for op in self.operations if op.name == name), None)

    def document(self) -> dict[str, Any]:
        """The §8 listing entry (a copy: a caller may change it without changing the registration)."""
        return {
            "type": self.type,
            "description": self.description,
            "schema": copy.deepcopy(dict(self.schema)),
            "text": self.text,
            "operations": [op.document() for op in self.operations],
        }


@dataclass(frozen=True)
class OperationResult:
    """What an operation answered (`result`, free-form per operation) and, when it appended a version,
    that version."""

    result: Mapping[str, Any] = field(default_factory=dict)
    record: Record | None = None


@runtime_checkable
class TypedProvider(Protocol):
    """A provider that registers types beyond the core ones and runs their operations."""

    def types(self) -> Sequence[TypeInfo]:
        """The types this provider registers (never the core types). No I/O: read at every listing."""
        ...

    async def operate(
        self,
        memory_id: str,
        record_id: str,
        name: str,
        input: Mapping[str, Any],
        by: Writer,
        at: datetime,
    ) -> OperationResult:
        """Run operation `name` on the record. RecordNotFound when the record is not in this memory;
        UnknownOperation when its type has no such operation; ProviderRejected when `input` does not
        follow the operation's schema. `by` and `at` stamp any version it appends."""
        ...


def find_type(types: Sequence[TypeInfo], name: str) -> TypeInfo | None:
    return next((info for info in types if info.type == name), None)
