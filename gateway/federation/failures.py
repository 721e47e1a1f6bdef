"""The one map from what a provider call raised to the API's error: every route, the migration's included.

A vendor's refusal of the request is the caller's to correct (422); a provider that cannot do the operation
is `memory_unsupported`; every other failure is `memory_unavailable` (503) with the reason, and a wait the
vendor or the breaker named travels as Retry-After. An adapter bug is logged and answered the same way,
never as a 500 with a stack trace.
"""

from __future__ import annotations

import logging
import math

from adapters.base import (
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    RecordNotFound,
    Unsupported,
)
from adapters.cursors import InvalidCursor
from gateway.base.errors import ApiError, bad_cursor, invalid, record_not_found, unavailable, unsupported
from gateway.federation.breaker import CircuitOpen
from gateway.federation.providers import Missed
from gateway.state.tree import MemoryNode

log = logging.getLogger("memfed.api")


def provider_failure(node: MemoryNode, exc: Exception) -> ApiError:
    """The chapter's error for what a call to `node`'s provider raised."""
    return failure_for(node.provider, exc)


def failure_for(provider: str, exc: Exception) -> ApiError:
    """The chapter's error for what a call to the provider named `provider` raised."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RecordNotFound):
        return record_not_found()
    if isinstance(exc, Unsupported):
        return unsupported(str(exc) or "The memory's provider does not support this operation.")
    if isinstance(exc, ProviderRateLimited | CircuitOpen):
        # A breaker resting after a 429 rests as long as the vendor said: the caller is told when to come back.
        error = unavailable(provider, exc.reason)
        wait = exc.retry_after_header() if isinstance(exc, CircuitOpen) else (
            str(max(1, math.ceil(exc.retry_after))) if exc.retry_after else None)
        if wait is not None:
            error.headers = {"Retry-After": wait}
            error.detail = {**error.detail, "retry_after": int(wait)}
        return error
    if isinstance(exc, Missed) and exc.reason == "busy":
        # Every slot of the provider was taken for longer than a call may wait: not the vendor failing.
        error = unavailable(provider, "busy")
        error.headers = {"Retry-After": "1"}
        error.detail = {**error.detail, "retry_after": 1}
        return error
    if isinstance(exc, ProviderTimeout):
        return unavailable(provider, "timeout")
    if isinstance(exc, InvalidCursor):
        return bad_cursor()  # the same answer as every gateway listing's, whoever's cursor it was
    if isinstance(exc, ProviderRejected):
        # What a provider refuses as invalid is, as far as the gateway can tell, the request's doing
        # (a cursor it did not issue, a value it cannot hold): the caller can correct it.
        return invalid(f"The memory's provider refused the request: {exc}",
                       detail={"provider": provider, "reason": "rejected"})
    if isinstance(exc, ProviderError):
        return unavailable(provider, exc.reason)
    # An adapter bug must not become a 500 with a stack trace; it is logged and answered as a
    # provider failure.
    log.error("provider %s raised unexpectedly", provider, exc_info=exc)
    return unavailable(provider, "adapter_error")
