"""The embedded providers' registered type (§8, `x.task`: adapters/local/task_type.py) and consolidation
pass (§9.2: adapters/local/consolidation.py), offered as `TypedProvider` and `ConsolidatingProvider`.

Both work through a provider's public methods (get, list, history, revise, forget) and nothing of its
store, so the provider on SQLite (adapters/local/provider.py) and the one on PostgreSQL
(adapters/postgres/provider.py) offer them alike by inheriting this class; the provider they act on is
`self`, typed as the contract's `Provider`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from adapters.base import Provider, Writer
from adapters.consolidation import Change, ChangeSink, Reversal, RunOutcome
from adapters.local import consolidation as local_consolidation
from adapters.local import task_type as local_types
from adapters.operations import OperationResult, TypeInfo


class TypesAndConsolidation:
    """`types`, `operate`, `consolidation_unit`, `consolidate` and `revert` for a provider that inherits it."""

    def types(self) -> Sequence[TypeInfo]:
        return local_types.TYPES

    async def operate(
        self: Provider, memory_id: str, record_id: str, name: str, input: Mapping[str, Any], by: Writer, at: datetime
    ) -> OperationResult:
        return await local_types.operate(self, memory_id, record_id, name, input, by, at)

    def consolidation_unit(self) -> str:
        return local_consolidation.UNIT

    async def consolidate(
        self: Provider,
        memory_id: str,
        run_id: str,
        *,
        budget: int | None,
        resume_after: datetime | None,
        by: Writer,
        at: datetime,
        on_change: ChangeSink | None = None,
    ) -> RunOutcome:
        return await local_consolidation.consolidate(
            self, memory_id, budget=budget, resume_after=resume_after, by=by, at=at, on_change=on_change
        )

    async def revert(
        self: Provider, memory_id: str, run_id: str, changes: Sequence[Change], *, by: Writer, at: datetime
    ) -> Reversal:
        return await local_consolidation.revert(self, memory_id, changes, by=by, at=at)
