"""Ratification: drafts a provider holds until someone approves them (an optional part of the contract).

UHP Memories has no draft state; memory-provider plugins may (`ratification_supported`): a write comes back
`pending`, stays out of recall, and is approved into a record or rejected (discarded entirely). A record
that is a draft carries `attributes["x.ratification"] = "pending"`, since a record's `status` is the
chapter's closed vocabulary. The gateway offers approve and reject to holders of `write` on the memory
when the provider is a `RatifyingProvider` whose `ratifies()` is true.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from adapters.base import Record

PENDING_KEY = "x.ratification"


@runtime_checkable
class RatifyingProvider(Protocol):
    def ratifies(self) -> bool:
        """Whether this provider keeps drafts at all (no I/O)."""
        ...

    async def approve(self, memory_id: str, record_id: str) -> Record:
        """The draft made a record. RecordNotFound when it is not in this memory."""
        ...

    async def reject(self, memory_id: str, record_id: str) -> None:
        """The draft discarded entirely. RecordNotFound when it is not in this memory."""
        ...
