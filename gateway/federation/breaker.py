"""A provider's circuit breaker and the gate every call to it passes: who may call, and how many at once.

The breaker counts only the vendor's own faults (a call that used its whole timeout, a 5xx, a 429):
time waiting for a slot and calls cut by the caller's deadline are not counted (gateway/federation/
providers.py decides which is which). Closed until `threshold` faults in a row; then open for
`reset_after` seconds (or the vendor's Retry-After); then half open: one probe goes through, and its
outcome closes or reopens it.

The gate bounds the calls in flight: `concurrency` while the provider is healthy, and once it has
started failing no more than the faults still needed to open the breaker, so a provider that has stopped
answering receives at most `max(concurrency, threshold)` calls before it is left alone, however many
requests are waiting. A caller waits at the gate (under its own deadline) or, when the breaker is open,
is turned away at once with `CircuitOpen` carrying how long the rest lasts.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from adapters.base import ProviderUnavailable


class CircuitOpen(ProviderUnavailable):
    reason = "circuit_open"
    maybe_applied = False  # the call was never made

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def retry_after_header(self) -> str | None:
        return str(max(1, math.ceil(self.retry_after))) if self.retry_after else None


@dataclass
class Breaker:
    """Closed until `threshold` failures in a row; then open for `reset_after` s; then one probe."""

    threshold: int
    reset_after: float
    failures: int = 0
    opened_at: float | None = None
    open_for: float = 0.0
    probing: bool = False
    # Replaceable so a test can move time on instead of sleeping through a rest (under load a sleep drifts).
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if self.clock() - self.opened_at >= self.open_for:
            return "half_open"
        return "open"

    def rests_for(self) -> float:
        """Seconds until the breaker lets a probe through (0 when it is not open)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.open_for - self.clock())

    def admit(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self.probing:
            self.probing = True
            return True
        return False

    def succeeded(self) -> None:
        self.failures = 0
        self.opened_at = None
        self.probing = False

    def failed(self, retry_after: float | None = None) -> None:
        self.failures += 1
        self.probing = False
        if retry_after is not None or self.failures >= self.threshold or self.opened_at is not None:
            self.opened_at = self.clock()
            self.open_for = max(retry_after or 0.0, self.reset_after if retry_after is None else 0.0)

    def released(self) -> None:
        """An admitted call ended saying nothing of the vendor's health (cut by its caller's deadline):
        a probe it was is given back, so the next call probes."""
        self.probing = False

    def document(self) -> dict[str, Any]:
        return {"state": self.state, "consecutive_failures": self.failures}


# Who the current request acts for (a member id), set for the request by gateway/federation/fairness.py: the gate
# shares a provider's slots between the members waiting for them.
caller: ContextVar[str | None] = ContextVar("memfed_caller", default=None)


class Gate:
    """Admission to one provider: the breaker's verdict, a bound on calls in flight, and a fair share.

    While other members wait for a slot, a member already holding half the provider's slots (at least
    one) waits too, so one member's flood cannot take every slot from the others; alone, a member may
    use them all."""

    def __init__(self, name: str, breaker: Breaker, concurrency: int) -> None:
        self.name = name
        self.breaker = breaker
        self.concurrency = concurrency
        self.in_flight = 0
        self._changed: asyncio.Event | None = None
        self._held: dict[str, int] = {}
        self._waiting: dict[str, int] = {}

    def _room(self) -> int:
        if self.breaker.failures == 0:
            return self.concurrency
        return max(1, min(self.concurrency, self.breaker.threshold - self.breaker.failures))

    def _refused(self) -> CircuitOpen:
        return CircuitOpen(f"provider {self.name} is resting after repeated failures", self.breaker.rests_for())

    def _over_share(self, who: str | None) -> bool:
        """Whether `who` holds its share while another member below its own share waits."""
        share = max(1, self.concurrency // 2)
        if who is None or self._held.get(who, 0) < share:
            return False
        return any(member != who and self._held.get(member, 0) < share for member in self._waiting)

    async def enter(self, *, health: bool = True) -> None:
        """Wait for a slot. `health=False` is a call that says nothing of the provider's health
        (counting): it is made only while the breaker is closed, and never as the probe."""
        who = caller.get()
        while True:
            state = self.breaker.state
            if state == "open" or (state == "half_open" and (not health or self.breaker.probing)):
                raise self._refused()
            if self.in_flight < self._room() and not self._over_share(who):
                if health and not self.breaker.admit():
                    raise self._refused()
                self.in_flight += 1
                if who is not None:
                    self._held[who] = self._held.get(who, 0) + 1
                return
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            _count(self._waiting, who, +1)
            try:
                await changed.wait()  # cancelled here: nothing was taken
            finally:
                _count(self._waiting, who, -1)

    def leave(self) -> None:
        self.in_flight -= 1
        _count(self._held, caller.get(), -1)
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()  # every waiter looks again: one finds the slot, an open breaker turns all away


def _count(counts: dict[str, int], who: str | None, step: int) -> None:
    if who is None:
        return
    left = counts.get(who, 0) + step
    if left > 0:
        counts[who] = left
    else:
        counts.pop(who, None)
