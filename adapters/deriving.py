"""An optional part of the contract: a provider that derives records in the background (§5.1).

Such a provider stores an observed episode at once and extracts facts and entities from it later. A job
of the gateway's (the outbox's, gateway/agent/outbox.py) is done when the episode is delivered; the
derivation it started is done only when the vendor says so. The gateway asks this before it reports a
delivered observe job `completed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class DerivingProvider(Protocol):
    async def derivation_pending(self, memory_id: str, record_ids: Sequence[str]) -> bool:
        """Whether the vendor is still deriving from these records (False once it reports them processed)."""
        ...
