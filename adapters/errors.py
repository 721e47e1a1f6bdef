"""What a provider call can fail with, as the gateway sees it (part of the contract in adapters.base).

Each failure maps to one answer: unavailable, timed out or rate limited degrade a recall and become 503
elsewhere; rejected is the caller's mistake; unsupported is an honest "this provider cannot".
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base of every failure an adapter reports. Raised `from` the vendor's own exception."""

    reason = "unavailable"


class ProviderUnavailable(ProviderError):
    """The vendor did not answer usefully: connection refused, 5xx, an answer we cannot parse."""

    reason = "unavailable"


class ProviderTimeout(ProviderError):
    """The vendor did not answer within the adapter's timeout."""

    reason = "timeout"


class ProviderRateLimited(ProviderUnavailable):
    """The vendor said 429. `retry_after` is in seconds when the vendor said how long to wait."""

    reason = "rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The vendor refused the request as invalid (a 4xx that is not ours to retry)."""

    reason = "rejected"


class Unsupported(ProviderError):
    """The provider cannot do this operation at all (the gateway answers `memory_unsupported`)."""

    reason = "unsupported"


class RecordNotFound(Exception):
    """No such record in this memory. Not a provider failure: a normal answer."""
