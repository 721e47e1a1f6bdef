"""A provider's own context recall: what it would place in an agent's context within a token budget, with
no question asked (an optional part of the contract).

Memory-provider plugins answer this natively (`Recall`: budgeted, ranked by the provider from the session's
context, no query text). The gateway's prime uses it, where a provider offers it, instead of the memory's
standing records; the capability document says so with `prime: true`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from adapters.base import Record


@runtime_checkable
class ContextProvider(Protocol):
    async def context_records(self, memory_id: str) -> Sequence[Record]:
        """The records the provider places for this memory within its own default budget, best first."""
        ...
