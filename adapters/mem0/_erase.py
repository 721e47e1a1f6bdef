"""Erase on mem0, as a mixin that `Mem0Provider` (adapters/mem0/provider.py) inherits.

mem0 deletes one memory per call, keeps a deleted memory's history rows, and (the OSS server) may apply a
delete it answers as failed. So each record is deleted on its own, a failure does not stop the others, a
failed delete is checked before it is called failed, and what could not be erased is said exactly
(`ErasureIncomplete`), so the caller never has to guess which records are gone.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from adapters.base import Erasure, ErasureIncomplete, ProviderError, RecordNotFound
from adapters.mem0 import _records as records
from adapters.mem0._recall import bounded
from adapters.mem0._sizes import EntitySizes
from adapters.mem0.wire import ABSENT, Wire

log = logging.getLogger("memfed.adapters.mem0")


class Mem0Erase:
    """`erase` of a `Provider` over mem0; `Mem0Provider` supplies the wire, the sizes and the identity."""

    _wire: Wire
    _sizes: EntitySizes
    _entity: Callable[[str], str]
    _fetch: Callable[[str, str], Awaitable[tuple[str, records.Stored]]]

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        """Delete each record's memory at mem0. Ids not in this memory are ignored and not reported.
        mem0 keeps a deleted memory's history rows (every text it had), so each erased id whose history
        mem0 still serves is reported unreachable; it is asked, not assumed, in case that ever changes.

        One failed delete does not stop the others, and a delete that failed is checked (the OSS server
        was seen to apply a delete it answered 502): when some ids could not be erased, `ErasureIncomplete`
        says exactly which were erased and which remain."""
        self._entity(memory_id)  # refuses a bad memory id before any call
        unique = list(dict.fromkeys(record_ids))
        outcomes = await bounded(lambda rid: self._erase_one(memory_id, rid), unique)
        erased = tuple(rid for rid, (done, _) in zip(unique, outcomes, strict=True) if done in ("gone", "kept"))
        for _ in erased:
            self._sizes.removed(self._entity(memory_id))
        kept = tuple(rid for rid, (done, _) in zip(unique, outcomes, strict=True) if done == "kept")
        failures = [(rid, error) for rid, (_, error) in zip(unique, outcomes, strict=True) if error is not None]
        if not failures:
            return Erasure(erased=erased, unreachable=kept)
        if not erased:
            raise failures[0][1]  # nothing was done: the first failure is the answer, as it was
        raise ErasureIncomplete(
            f"mem0 erased {len(erased)} records and failed on {len(failures)}",
            erased=erased,
            unreachable=kept,
            remaining=tuple(rid for rid, _ in failures),
            reason=failures[0][1].reason,
        )

    async def _erase_one(self, memory_id: str, record_id: str) -> tuple[str, ProviderError | None]:
        """("gone" | "kept" | "absent" | "failed", the failure): kept is gone with its history still served."""
        try:
            vendor_id, _ = await self._fetch(memory_id, record_id)
        except RecordNotFound:
            return "absent", None
        except ProviderError as exc:
            return "failed", exc
        try:
            if await self._wire.send(self._wire.dialect.delete(vendor_id), absent_ok=True) is ABSENT:
                return "absent", None  # deleted by someone else between the read and the delete
        except ProviderError as exc:
            try:
                still = await self._wire.send(self._wire.dialect.get(vendor_id), absent_ok=True)
            except ProviderError:
                return "failed", exc
            if still is not ABSENT and still is not None:
                return "failed", exc
            log.info("a mem0 delete answered as failed was applied")
        return ("kept" if await self._history_kept(vendor_id) else "gone"), None

    async def _history_kept(self, vendor_id: str) -> bool:
        """Whether mem0 still serves this deleted memory's history. Not knowing counts as yes."""
        try:
            rows = await self._wire.send(self._wire.dialect.history(vendor_id), absent_ok=True)
        except ProviderError as exc:
            log.warning("could not check mem0 history after a delete: %s", type(exc).__name__)
            return True
        return not (rows is ABSENT or rows == [])
