"""An optional part of the contract: a provider whose vendor keeps a graph of its own.

The graph read (`POST /v1/memories/{id}/graph`, gateway/api/graph.py) walks records and their references.
A vendor that is a graph (Zep: entities as nodes, facts as edges between them) can say which records lie
around one record itself, so the read answers from the vendor's graph rather than from a listing of the
whole memory; the gateway still applies `hops`, `limit` and who may read what to what comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from adapters.records import Record


@runtime_checkable
class GraphProvider(Protocol):
    async def neighbourhood(self, memory_id: str, record_id: str, hops: int) -> Sequence[Record] | None:
        """The current records within `hops` of `record_id` in the vendor's own graph, that record first
        (facts and the entities they join, each fact's references naming its ends); None when the record is
        not in this memory."""
        ...
