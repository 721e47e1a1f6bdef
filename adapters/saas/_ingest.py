"""Episodes through the SaaS memory's ingest jobs, as a mixin that `SaasProvider` inherits.

An episode (what `observe` hands over, or a stated `remember` of type episode) is queued as a `raw` job,
which stores the transcript as one episodic record; the job is polled to its end within the call, and
memfed's metadata (writer, write id, the full parts) is then attached to that record in place. When the
provider is configured to derive (`derivation = "agent"`), the same transcript is also queued as a `smart`
job, whose records (facts the vendor's LLM extracted) are the vendor's own, read back as written by the
provider. Both carry an Idempotency-Key made of memfed's write id, so a write sent again after a lost
answer gets the same job and the same record, never a second one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from adapters.base import ProviderError, ProviderTimeout, ProviderUnavailable, Record
from adapters.saas import wire as w

log = logging.getLogger("memfed.adapters.saas")

_ATTACHED = (w.F_IMPORTANCE, w.F_TIER, w.F_CATEGORY, w.F_EXPIRES, w.F_METADATA)


class SaasIngest:
    """`SaasProvider` supplies the wire, the scope and the polling settings named below."""

    _wire: w.Wire
    _scope: Callable[[str], dict[str, str]]
    _smart: bool
    _poll_every: float
    _polls: int

    async def _ingested(self, memory_id: str, draft: Record, body: Mapping[str, Any]) -> Any:
        """The vendor record a raw ingest of this episode made, with memfed's fields attached."""
        scope = self._scope(memory_id)
        transcript = str(body[w.F_CONTENT])
        write_id = draft.write_id
        made = await self._job(transcript, "raw", scope, write_id)
        if len(made) != 1:
            raise ProviderUnavailable(f"a raw ingest made {len(made)} records, expected one")
        attach = {k: body[k] for k in _ATTACHED if k in body}
        key = f"memfed-attach-{write_id}" if write_id else None
        item = await self._wire.send(w.correct(made[0], attach, idempotency_key=key))
        if self._smart:
            try:
                await self._job(transcript, "smart", scope, write_id)
            except ProviderError as exc:
                # The episode is kept; what the vendor derives from it is its own business (§5.1).
                log.warning("saas smart ingest failed after the episode was stored: %s", type(exc).__name__)
        return item

    async def _job(self, transcript: str, mode: Literal["smart", "raw"], scope: Mapping[str, str],
                   write_id: str | None) -> list[str]:
        """Queue an ingest and poll it to its end; the ids of the records it made."""
        key = f"memfed-ingest-{mode}-{write_id}" if write_id else None
        session = f"memfed-{write_id}" if write_id else None
        queued = await self._wire.send(w.ingest(transcript, mode, scope, session_id=session, idempotency_key=key))
        job_id = w.job_id_of(queued)
        for attempt in range(self._polls):
            if attempt:
                await asyncio.sleep(self._poll_every)
            body = await self._wire.send(w.job(job_id))
            status, made = w.job_state(body)
            if status == w.JOB_DONE:
                return made
            if status == w.JOB_FAILED:
                raise w.job_failure(body)
        raise ProviderTimeout(f"the SaaS memory ingest job {job_id} did not finish after {self._polls} polls")
