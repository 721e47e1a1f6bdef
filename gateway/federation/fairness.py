"""Per-member fairness (`[limits]`): how many requests one member may have in flight, and how fast it may ask.

One member flooding the gateway must not take it away from the others. Each request of a member (not
an administrator: operators import, migrate and repair in bulk) takes one of its `member_concurrency`
places for as long as it runs, and one token of a bucket refilled at `member_rate` per second holding
at most `member_burst`. A request past either is answered 429 `rate_limit_error` before any work, with
`Retry-After` (in the header and in the envelope's `detail.retry_after`): a second for a place, the time
the next token takes for the rate.

In-process state: each gateway process keeps its own counts (replicas each allow the limits).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gateway.base.config import Limits
from gateway.base.errors import ApiError, rate_limited
from gateway.federation.breaker import caller
from gateway.identity.auth import Principal

_KEPT = 10_000  # members whose buckets are kept before full ones (nothing to remember) are dropped


def too_many(message: str, retry_after: float, limit: str) -> ApiError:
    wait = max(1, math.ceil(retry_after))
    return rate_limited(message, wait, limit)


class MemberLimits:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # member -> (tokens, when they were counted)

    @contextmanager
    def hold(self, principal: Principal | None) -> Iterator[None]:
        """A place for the request while it runs; ApiError 429 when the member has none left."""
        limits = self.limits
        acting = caller.set(principal.member_id if principal is not None else None)  # the gate's fair share
        try:
            if principal is None or principal.is_admin or not (limits.member_concurrency or limits.member_rate):
                yield
            else:
                with self._held(principal.member_id):
                    yield
        finally:
            caller.reset(acting)

    @contextmanager
    def _held(self, member: str) -> Iterator[None]:
        limits = self.limits
        running = self._in_flight.get(member, 0)
        if limits.member_concurrency and running >= limits.member_concurrency:
            raise too_many(f"At most {limits.member_concurrency} requests of one member run at once; wait for "
                           "one to finish.", 1.0, "member_concurrency")
        self._take_token(member)
        self._in_flight[member] = running + 1
        try:
            yield
        finally:
            left = self._in_flight[member] - 1
            if left:
                self._in_flight[member] = left
            else:
                del self._in_flight[member]

    def _take_token(self, member: str) -> None:
        rate = self.limits.member_rate
        if not rate:
            return
        burst = float(self.limits.burst())
        now = time.monotonic()
        tokens, then = self._buckets.get(member, (burst, now))
        tokens = min(burst, tokens + (now - then) * rate)
        if tokens < 1.0:
            self._buckets[member] = (tokens, now)
            raise too_many(f"At most {rate:g} requests per second of one member.", (1.0 - tokens) / rate,
                           "member_rate")
        self._buckets[member] = (tokens - 1.0, now)
        if len(self._buckets) > _KEPT:
            self._forget_full(now, rate, burst)

    def _forget_full(self, now: float, rate: float, burst: float) -> None:
        for member, (tokens, then) in list(self._buckets.items()):
            if tokens + (now - then) * rate >= burst:
                del self._buckets[member]
