"""The HTTP call every vendor adapter makes (mem0, Zep, the SaaS API), and how its failures are named.

One request through the injected client: the JSON body encoded with orjson, no redirect followed (the key
never follows one anywhere, and httpx drops `Authorization` but not `X-API-Key` on a redirect), the
adapter's timeout. What goes wrong becomes the contract's errors here, the same for every vendor: no answer
in time is ProviderTimeout, no connection ProviderUnavailable (each with whether the request may have
reached the vendor), 429 ProviderRateLimited with the Retry-After it said, 401/403 ProviderUnauthorized
(memfed's own credential, not the request), another 4xx ProviderRejected, anything else not 2xx
ProviderUnavailable. A vendor's own codes (Zep's 404, the SaaS API's quota errors) are the vendor module's
to name before it asks for the generic failure. The key is redacted from every message before it is cut.
"""

from __future__ import annotations

import email.utils
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from json import loads as json_loads
from typing import Any

import httpx
import orjson

from adapters.clock import now
from adapters.errors import (
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
)

log = logging.getLogger("memfed.adapters.http")

DETAIL_CHARS = 200  # of a vendor's error text kept in a message


class Secret:
    """A vendor key. Its repr and str never show it, so neither can a log line or a traceback."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class Request:
    """What every vendor call names; each vendor's `Call` adds what only it sends."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


# What a send answers for a 404 when the caller allows that the thing is gone (distinct from an empty
# body, which is a success).
ABSENT: Any = _Absent()


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds, given as a number of seconds or as an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return max(0.0, (when - now()).total_seconds())


def may_have_arrived(exc: httpx.HTTPError) -> bool:
    """Whether a request that failed this way may have reached the vendor: not when no connection was made."""
    return not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def redacted(text: str, key: Secret) -> str:
    """`text` without the key, its white space folded and cut short (redacted first: a cut could halve it)."""
    secret = key.reveal()
    return " ".join((text.replace(secret, "[redacted]") if secret else text).split())[:DETAIL_CHARS]


async def request(client: httpx.AsyncClient, vendor: str, method: str, url: str, *, what: str,
                  headers: Mapping[str, str], within: float, key: Secret, params: Mapping[str, Any] | None = None,
                  json: Any = None) -> httpx.Response:
    """The vendor's answer to one request, whatever its status; ProviderTimeout or ProviderUnavailable when
    there was none."""
    sent = dict(headers)
    if json is not None:
        sent["Content-Type"] = "application/json"
    try:
        return await client.request(
            method, url, params=params,
            # orjson: a search over a few hundred memories is a 20 KB body, which json.dumps took ~0.13 ms
            # to encode on the gateway's event loop, orjson ~0.02 ms.
            content=orjson.dumps(json) if json is not None else None,
            headers=sent, timeout=within, follow_redirects=False,
        )
    except httpx.TimeoutException as exc:
        log.warning("%s %s timed out after %.1fs", vendor, what, within)
        raise ProviderTimeout(f"{vendor} did not answer {what} within {within}s",
                              maybe_applied=may_have_arrived(exc)) from exc
    except httpx.HTTPError as exc:
        log.warning("%s %s failed: %s", vendor, what, type(exc).__name__)
        raise ProviderUnavailable(f"{vendor} could not be reached for {what}: {type(exc).__name__}: "
                                  f"{redacted(str(exc), key)}", maybe_applied=may_have_arrived(exc)) from exc


def failure(vendor: str, what: str, response: httpx.Response, detail: str) -> ProviderError:
    """The contract's error for an answer that is not 2xx; `detail` is the vendor's own word, redacted."""
    status = response.status_code
    if status == 429:
        return ProviderRateLimited(f"{vendor} is rate limiting {what}",
                                   retry_after=retry_after(response.headers.get("retry-after")))
    if status in (401, 403):
        return ProviderUnauthorized(f"{vendor} refused memfed's credential for {what} ({status})")
    if 400 <= status < 500:
        return ProviderRejected(f"{vendor} refused {what} ({status}): {detail}")
    return ProviderUnavailable(f"{vendor} failed {what} ({status}): {detail}")


def decoded(vendor: str, what: str, content: bytes) -> Any:
    """A JSON answer's value (None for an empty body); ProviderUnavailable for one that is not JSON."""
    if not content:
        return None
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass  # not JSON, or JSON orjson refuses (an integer past 64 bits): the json module decides
    try:
        return json_loads(content)
    except ValueError as exc:
        raise ProviderUnavailable(f"{vendor} answered {what} with something that is not JSON") from exc
