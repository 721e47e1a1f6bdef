"""Calling a memory's provider from a route: the provider's failures become the chapter's errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from adapters.base import (
    Provider,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    RecordNotFound,
    Unsupported,
)
from gateway.errors import ApiError, record_not_found, unavailable, unsupported
from gateway.providers import ProviderHandle
from gateway.state import schema as t
from gateway.state.tree import MemoryNode

log = logging.getLogger("memfed.api")
T = TypeVar("T")


def handle_for(services: Any, node: MemoryNode) -> ProviderHandle:
    handle: ProviderHandle | None = services.providers.get(node.provider)
    if handle is None:
        raise unavailable(node.provider, "not_connected")
    return handle


async def on_provider(services: Any, node: MemoryNode, fn: Callable[[Provider], Awaitable[T]], *, read: bool) -> T:
    handle = handle_for(services, node)
    try:
        return await handle.call(fn, read=read)
    except RecordNotFound:
        raise record_not_found() from None
    except Unsupported as exc:
        raise unsupported(str(exc) or "The memory's provider does not support this operation.") from None
    except ProviderRateLimited as exc:
        headers = {"Retry-After": str(int(exc.retry_after))} if exc.retry_after else None
        error = unavailable(node.provider, "rate_limited")
        error.headers = headers or {}
        raise error from None
    except ProviderTimeout:
        raise unavailable(node.provider, "timeout") from None
    except ProviderRejected as exc:
        # What a provider refuses as invalid is, as far as the gateway can tell, the request's doing
        # (a cursor it did not issue, a value it cannot hold): the caller can correct it.
        raise ApiError(422, "memory_invalid", f"The memory's provider refused the request: {exc}",
                       detail={"provider": node.provider, "reason": "rejected"}) from None
    except ProviderError as exc:
        raise unavailable(node.provider, exc.reason) from None
    except ApiError:
        raise
    except Exception:
        # An adapter bug must not become a 500 with a stack trace; it is logged and answered as a
        # provider failure.
        log.exception("provider %s raised unexpectedly", node.provider)
        raise unavailable(node.provider, "adapter_error") from None


async def resolve_record_id(services: Any, memory_id: str, record_id: str) -> str | None:
    """The current id of a record that was moved to another provider (its old id keeps working)."""
    row = await services.store.fetch_one(t.record_aliases, memory_id=memory_id, old_id=record_id)
    return row.new_id if row else None


async def with_alias(services: Any, node: MemoryNode, record_id: str,
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


async def record_counts(services: Any, nodes: Iterable[MemoryNode]) -> dict[str, int | None]:
    """Active records per memory, one call per provider; a provider that fails gives `None` counts."""
    cache = services.counts
    counts: dict[str, int | None] = {}
    by_provider: dict[str, list[str]] = {}
    for node in nodes:
        cached = cache.get(node.id)
        if cached is not None:
            counts[node.id] = cached
        else:
            by_provider.setdefault(node.provider, []).append(node.id)

    async def count_on(name: str, ids: list[str]) -> Mapping[str, int]:
        handle = services.providers.get(name)
        if handle is None:
            return {}
        try:
            got: Mapping[str, int] = await handle.call(lambda p: p.count(ids), read=True)
            return got
        except Exception:  # counts are a hint; a provider failure must not fail the listing
            log.info("counting records on %s failed", name)
            return {}

    def shared(name: str, ids: list[str]) -> Awaitable[Mapping[str, int]]:
        # When the cached counts expire, every request in flight would count the same memories again;
        # they wait for the one count already asked instead.
        key = (name, tuple(ids))
        task = services.counting.get(key)
        if task is None:
            task = services.counting[key] = asyncio.ensure_future(count_on(name, ids))
            task.add_done_callback(lambda _: services.counting.pop(key, None))
        return asyncio.shield(task)

    answers = await asyncio.gather(*(shared(name, ids) for name, ids in by_provider.items()))
    for ids, got in zip(by_provider.values(), answers, strict=True):
        for memory_id in ids:
            counts[memory_id] = got.get(memory_id) if got else None
            if counts[memory_id] is not None:
                cache[memory_id] = counts[memory_id]
    return counts
