"""Write ids, and what the gateway knows of a write whose provider call failed.

Every write the gateway sends (remember, revise, forget, an observed episode) carries a write id that the
adapter keeps with what it writes. A call that failed after it may have reached the vendor (a timeout, a
lost answer, a 5xx: `ProviderError.maybe_applied`) leaves the write's outcome unknown. The gateway then
asks the provider for the write by its id (`FindsWrites.find_write`): found, the write was made and is
answered as made; not found, it may still land, for the provider's `write_settle` seconds after the
failure, and until then it is not sent again. A repeat of the request with the same Idempotency-Key (or
the outbox's next attempt at an episode) asks again before it writes.

The remaining bound: a vendor that applies a request later than `write_settle` after memfed gave up on it
can receive that write twice. The embedded provider's writes settle when its call ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.base import FindsWrites, ProviderError, Record, RecordNotFound
from gateway.base.ids import new_id


@dataclass(frozen=True)
class Retry:
    """An earlier attempt of this write ran and its outcome is not known. `unknown_since` (ms) is when it
    may last have reached the provider; None when it cannot have (it ended before any provider call)."""

    unknown_since: int | None


@dataclass
class WriteIntent:
    """One request's write: its id, whether an earlier attempt of it may have landed, and (set when this
    attempt's provider call fails with an unknown outcome) when that happened."""

    write_id: str
    retry: Retry | None = None
    unknown_at: int | None = None

    def unknown_since(self, now: int) -> int:
        """When this write may last have reached its provider, for the next attempt's wait."""
        if self.unknown_at is not None:
            return self.unknown_at
        if self.retry is not None and self.retry.unknown_since is not None:
            return self.retry.unknown_since
        return now


def new_write_id() -> str:
    return new_id("write")


def maybe_applied(exc: BaseException) -> bool:
    """Whether a write call that raised `exc` may still have been carried out by the provider. An
    exception that is no provider's answer at all (an adapter's own bug) may have come after the write."""
    if isinstance(exc, ProviderError):
        return exc.maybe_applied
    return not isinstance(exc, RecordNotFound)


def settle_ms(handle: Any) -> int:
    return int(handle.config.settle_seconds() * 1000)


class CannotLook(Exception):
    """The provider cannot find writes by id (it does not implement `FindsWrites`)."""


async def find_written(handle: Any, memory_id: str, write_id: str, record_id: str | None = None) -> Record | None:
    """What the write left at the memory's provider, through its handle (a read: timeout, breaker, one
    retry); a provider failure is raised as it is. CannotLook for a provider without `find_write`."""
    if not isinstance(handle.provider, FindsWrites):
        raise CannotLook(handle.name)
    found: Record | None = await handle.call(
        lambda p: p.find_write(memory_id, write_id, record_id=record_id), read=True)
    return found
