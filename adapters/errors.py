"""What a provider call can fail with, as the gateway sees it (part of the contract in adapters.base).

Each failure maps to one answer: unavailable, timed out or rate limited degrade a recall and become 503
elsewhere; rejected is the caller's mistake; unsupported is an honest "this provider cannot".

`maybe_applied` says whether a write that failed this way may still have been carried out by the vendor
(the request reached it and the answer was lost, late or a 5xx). The gateway then looks for the write by
its write id before it reports a failure or writes again. An adapter that knows its request never left
(a refused connection) says so with `maybe_applied=False`.
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base of every failure an adapter reports. Raised `from` the vendor's own exception."""

    reason = "unavailable"
    maybe_applied = True  # not knowing counts as "may have been applied"

    def __init__(self, *args: object, maybe_applied: bool | None = None) -> None:
        super().__init__(*args)
        if maybe_applied is not None:
            self.maybe_applied = maybe_applied


class ProviderUnavailable(ProviderError):
    """The vendor did not answer usefully: connection refused, 5xx, an answer we cannot parse."""

    reason = "unavailable"


class ProviderTimeout(ProviderError):
    """The vendor did not answer within the adapter's timeout."""

    reason = "timeout"


class ProviderRateLimited(ProviderUnavailable):
    """The vendor said 429. `retry_after` is in seconds when the vendor said how long to wait."""

    reason = "rate_limited"
    maybe_applied = False  # a vendor that says 429 turned the request away before doing it

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderUnauthorized(ProviderUnavailable):
    """The vendor refused memfed's own credential (401/403): memfed's configuration is wrong, not the
    request. Unavailable, so it degrades a recall, answers 503 elsewhere, keeps outbox rows for retry and
    counts towards the breaker."""

    reason = "unauthorized"
    maybe_applied = False  # a vendor that refuses the credential turned the request away before doing it


class ErasureIncomplete(ProviderUnavailable):
    """An erase that removed some records and failed on others. Every id asked is in exactly one of
    `erased` (gone; those of them whose copies remain are also in `unreachable`) or `remaining` (not
    known to be gone: erase them again), so the caller learns what was done even though it failed."""

    def __init__(
        self,
        message: str,
        *,
        erased: tuple[str, ...],
        unreachable: tuple[str, ...],
        remaining: tuple[str, ...],
        reason: str = "unavailable",
    ) -> None:
        super().__init__(message)
        self.erased = erased
        self.unreachable = unreachable
        self.remaining = remaining
        self.reason = reason  # why the remaining ones failed (timeout, unauthorized, ...)


class ProviderRejected(ProviderError):
    """The vendor refused the request as invalid (a 4xx that is not ours to retry)."""

    reason = "rejected"
    maybe_applied = False


class Unsupported(ProviderError):
    """The provider cannot do this operation at all (the gateway answers `memory_unsupported`)."""

    reason = "unsupported"
    maybe_applied = False


class RecordLimit(Unsupported):
    """The memory holds as many records as the provider can list, so one more could never be read back,
    exported or moved: the write is refused, and a memory already past the limit says so on every read."""

    reason = "record_limit"


class RecordNotFound(Exception):
    """No such record in this memory. Not a provider failure: a normal answer."""
