"""The HTTP call every vendor adapter shares (adapters.vendor_http): statuses become the contract's errors the
same way for every vendor, Retry-After is read in both of its forms, and the key never reaches a message."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from adapters import vendor_http
from adapters.base import (
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
)

KEY = vendor_http.Secret("sk-test-very-secret")


def _client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler)


async def _answer(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> httpx.Response:
    async with _client(httpx.MockTransport(lambda _: httpx.Response(status, headers=headers, content=body))) as c:
        return await vendor_http.request(c, "acme", "GET", "https://vendor.test/x", what="GET /x", headers={},
                                         within=1.0, key=KEY)


@pytest.mark.parametrize(("status", "kind"), [(429, ProviderRateLimited), (401, ProviderUnauthorized),
                                              (403, ProviderUnauthorized), (400, ProviderRejected),
                                              (422, ProviderRejected), (500, ProviderUnavailable),
                                              (307, ProviderUnavailable)])
async def test_each_status_is_the_contracts_error(status: int, kind: type[ProviderError]) -> None:
    """429, 401/403, other 4xx and anything else not 2xx map to the one error each, whichever vendor."""
    response = await _answer(status)
    error = vendor_http.failure("acme", "GET /x", response, "said")
    assert type(error) is kind
    assert str(status) in str(error) or kind is ProviderRateLimited


async def test_retry_after_is_read_as_seconds_or_as_an_http_date() -> None:
    """`Retry-After: 7` is 7 seconds; an HTTP date about a minute ahead is about 60; garbage is no wait."""
    assert vendor_http.retry_after("7") == 7.0
    ahead = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=61), usegmt=True)
    wait = vendor_http.retry_after(ahead)
    assert wait is not None and 50 <= wait <= 61
    assert vendor_http.retry_after("soon") is None and vendor_http.retry_after(None) is None
    limited = vendor_http.failure("acme", "GET /x", await _answer(429, {"retry-after": "12"}), "")
    assert isinstance(limited, ProviderRateLimited) and limited.retry_after == 12.0


async def test_no_answer_is_a_timeout_or_unavailable_and_never_shows_the_key() -> None:
    """A timeout is ProviderTimeout, a refused connection ProviderUnavailable that cannot have arrived; the
    key echoed in the transport's message is redacted."""
    def timing_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refusing(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused with {KEY.reveal()}", request=request)

    async with _client(httpx.MockTransport(timing_out)) as c:
        with pytest.raises(ProviderTimeout) as late:
            await vendor_http.request(c, "acme", "GET", "https://vendor.test/x", what="GET /x", headers={},
                                      within=0.5, key=KEY)
    assert late.value.maybe_applied is True
    async with _client(httpx.MockTransport(refusing)) as c:
        with pytest.raises(ProviderUnavailable) as down:
            await vendor_http.request(c, "acme", "GET", "https://vendor.test/x", what="GET /x", headers={},
                                      within=0.5, key=KEY)
    assert down.value.maybe_applied is False
    assert KEY.reveal() not in str(down.value) and "[redacted]" in str(down.value)
    assert KEY.reveal() not in repr(KEY) and KEY.reveal() not in str(KEY)


def test_a_body_that_is_not_json_is_unavailable_and_big_integers_still_read() -> None:
    """An answer that is not JSON is the vendor failing; an integer past 64 bits (orjson refuses it) reads."""
    assert vendor_http.decoded("acme", "GET /x", b"") is None
    assert vendor_http.decoded("acme", "GET /x", b'{"n": 18446744073709551616}') == {"n": 2**64}
    with pytest.raises(ProviderUnavailable):
        vendor_http.decoded("acme", "GET /x", b"<html>")
