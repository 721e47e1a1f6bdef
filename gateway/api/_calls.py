"""Calling a memory's provider from a route: the provider's failures become the chapter's errors."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from adapters.base import (
    ErasureIncomplete,
    Provider,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    RecordNotFound,
    Unsupported,
)
from gateway.errors import ApiError, record_not_found, unavailable, unsupported
from gateway.federation.breaker import CircuitOpen
from gateway.federation.providers import Missed, ProviderHandle
from gateway.state.tree import MemoryNode

if TYPE_CHECKING:
    from gateway.api._endpoint import Call
    from gateway.services import Services

log = logging.getLogger("memfed.api")
T = TypeVar("T")


def handle_for(services: Services, node: MemoryNode) -> ProviderHandle:
    handle: ProviderHandle | None = services.providers.get(node.provider)
    if handle is None:
        raise unavailable(node.provider, "not_connected")
    return handle


async def on_provider(services: Services, node: MemoryNode, fn: Callable[[Provider], Awaitable[T]], *, read: bool) -> T:
    handle = handle_for(services, node)
    try:
        return await handle.call(fn, read=read)
    except ErasureIncomplete:
        raise  # what was erased before the failure is the erase route's to report (api/records.py)
    except Exception as exc:
        raise provider_failure(node, exc) from None


def provider_failure(node: MemoryNode, exc: Exception) -> ApiError:
    """The chapter's error for what a provider call raised."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RecordNotFound):
        return record_not_found()
    if isinstance(exc, Unsupported):
        return unsupported(str(exc) or "The memory's provider does not support this operation.")
    if isinstance(exc, ProviderRateLimited | CircuitOpen):
        # A breaker resting after a 429 rests as long as the vendor said: the caller is told when to come back.
        error = unavailable(node.provider, exc.reason)
        wait = exc.retry_after_header() if isinstance(exc, CircuitOpen) else (
            str(max(1, math.ceil(exc.retry_after))) if exc.retry_after else None)
        if wait is not None:
            error.headers = {"Retry-After": wait}
            error.detail = {**error.detail, "retry_after": int(wait)}
        return error
    if isinstance(exc, Missed) and exc.reason == "busy":
        # Every slot of the provider was taken for longer than a call may wait: not the vendor failing.
        error = unavailable(node.provider, "busy")
        error.headers = {"Retry-After": "1"}
        error.detail = {**error.detail, "retry_after": 1}
        return error
    if isinstance(exc, ProviderTimeout):
        return unavailable(node.provider, "timeout")
    if isinstance(exc, ProviderRejected):
        # What a provider refuses as invalid is, as far as the gateway can tell, the request's doing
        # (a cursor it did not issue, a value it cannot hold): the caller can correct it.
        return ApiError(422, "memory_invalid", f"The memory's provider refused the request: {exc}",
                        detail={"provider": node.provider, "reason": "rejected"})
    if isinstance(exc, ProviderError):
        return unavailable(node.provider, exc.reason)
    # An adapter bug must not become a 500 with a stack trace; it is logged and answered as a
    # provider failure.
    log.error("provider %s raised unexpectedly", node.provider, exc_info=exc)
    return unavailable(node.provider, "adapter_error")


async def resolve_record_id(services: Services, memory_id: str, record_id: str) -> str | None:
    """The current id of a record that was moved to another provider (its old id keeps working)."""
    found: str | None = await services.store.aliases.current_id(memory_id, record_id)
    return found


async def with_alias(services: Services, node: MemoryNode, record_id: str,
                     fn: Callable[[str], Callable[[Provider], Awaitable[T]]], *, read: bool) -> T:
    """Run `fn(record_id)` on the provider; on not-found retry once with the alias, if there is one."""
    try:
        return await on_provider(services, node, fn(record_id), read=read)
    except ApiError as error:
        if error.code != "memory_record_not_found":
            raise
        alias = await resolve_record_id(services, node.id, record_id)
        if alias is None:
            raise
        return await on_provider(services, node, fn(alias), read=read)


async def record_counts(services: Services, nodes: Iterable[MemoryNode], call: Call | None = None,
                        *, wait: bool = True) -> dict[str, int | None]:  # fmt: skip
    """Active records per memory (gateway.federation.counts); None where the provider could not count, or,
    with `wait=False`, where no count is known yet. Counts that are old (or unknown, not waited for)
    are asked once `call`'s answer has left."""
    return await services.counts.of(services.providers, nodes,
                                    later=call.after_answer if call is not None else None, wait=wait)
