"""Calling a memory's provider from a route: the provider's failures become the chapter's errors."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from adapters.base import (
    ErasureIncomplete,
    Provider,
)
from gateway.base.errors import ApiError, unavailable
from gateway.federation.failures import provider_failure
from gateway.federation.providers import ProviderHandle
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
