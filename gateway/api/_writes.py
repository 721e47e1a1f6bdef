"""A route's write to a memory's provider, stamped with its write id and never reported failed when it
was made (gateway/federation/writes.py says how outcomes are known). Erase leaves nothing to find by a write id:
`erase_on_provider` says when its outcome is unknown, and then removes the file bytes it was asked to.

`write_record` runs remember, revise and forget: it first looks for an earlier attempt of the same write
(a repeat with the same Idempotency-Key), then writes, and when the call fails once it may have reached
the provider, looks again; what it still cannot find is answered 503 `memory_unavailable` with
`detail.outcome: "unknown"` and a Retry-After, and the Idempotency-Key keeps that outcome for the repeat.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence

from adapters.base import Erasure, ErasureIncomplete, Provider, ProviderError, Record
from gateway.api._calls import handle_for
from gateway.api._endpoint import Call
from gateway.base import errors
from gateway.base.clock import now_ms
from gateway.base.errors import ApiError
from gateway.federation.failures import provider_failure
from gateway.federation.providers import ProviderHandle
from gateway.federation.writes import (
    CannotLook,
    WriteIntent,
    find_written,
    maybe_applied,
    new_write_id,
    settle_ms,
)
from gateway.state.tree import MemoryNode

log = logging.getLogger("memfed.api")


def write_intent(call: Call) -> WriteIntent:
    """The request's write: the one its Idempotency-Key claimed, or a fresh one."""
    if call.write is None:
        call.write = WriteIntent(new_write_id())
    return call.write


def outcome_unknown(provider: str, reason: str, wait_ms: int) -> ApiError:
    seconds = max(1, math.ceil(wait_ms / 1000))
    return errors.outcome_unknown(provider, reason, seconds)


async def write_record(call: Call, node: MemoryNode, write: Callable[[Provider], Awaitable[Record]], *,
                       record_id: str | None = None) -> Record:
    """Make the write once. `record_id` names the record a revise or forget changes."""
    intent = write_intent(call)
    handle = handle_for(call.services, node)
    since = intent.retry.unknown_since if intent.retry is not None else None
    if since is not None:  # an earlier attempt may have reached the provider
        found = await _look_again(handle, node, intent.write_id, record_id, since)
        if found is not None:
            return found
        left = since + settle_ms(handle) - now_ms()
        if left > 0:
            # The earlier attempt may still land: writing now could make the record twice.
            raise outcome_unknown(node.provider, "unsettled", left)
    try:
        return await handle.call(write, read=False)
    except Exception as exc:
        if not maybe_applied(exc):
            raise provider_failure(node, exc) from None
        failure = provider_failure(node, exc)
    intent.unknown_at = now_ms()
    try:
        found = await find_written(handle, node.id, intent.write_id, record_id)
    except (CannotLook, ProviderError):
        found = None
    if found is not None:
        return found
    detail = failure.detail if isinstance(failure.detail, dict) else {}
    raise outcome_unknown(node.provider, str(detail.get("reason", "unavailable")), settle_ms(handle))


async def _look_again(handle: ProviderHandle, node: MemoryNode, write_id: str, record_id: str | None,
                      since: int) -> Record | None:
    """The earlier attempt's write if the provider has it; 503 with the outcome still unknown when the
    provider cannot be asked now."""
    try:
        return await find_written(handle, node.id, write_id, record_id)
    except CannotLook:
        return None  # nothing to ask: once settled, the write is sent again (at least once, not exactly once)
    except ProviderError as exc:
        left = since + settle_ms(handle) - now_ms()
        raise outcome_unknown(node.provider, exc.reason, max(left, 1000)) from None


async def erase_on_provider(call: Call, node: MemoryNode, record_ids: Sequence[str],
                            files_of: Mapping[str, set[str]]) -> Erasure:
    """The provider's erase of `record_ids` (`files_of`: the files each names). When its call fails once
    it may have reached the provider, some records may be gone: they are released as erased, so that the
    bytes of their file parts that no other record names go too and none outlives its record, and the
    answer is 503 with the outcome unknown (a repeat erases whatever is left). An incomplete erase says
    what it did (ErasureIncomplete) and is the route's to report."""
    handle = handle_for(call.services, node)
    try:
        erasure: Erasure = await handle.call(lambda p: p.erase(node.id, record_ids), read=False)
        return erasure
    except ErasureIncomplete:
        raise
    except Exception as exc:
        if not maybe_applied(exc):
            raise provider_failure(node, exc) from None
        failure = provider_failure(node, exc)
    write_intent(call).unknown_at = now_ms()
    await call.services.files.release(node.id, record_ids, set().union(*(files_of.get(r, set()) for r in record_ids)))
    call.services.written(node.id)
    detail = failure.detail if isinstance(failure.detail, dict) else {}
    raise outcome_unknown(node.provider, str(detail.get("reason", "unavailable")), settle_ms(handle))
