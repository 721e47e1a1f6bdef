"""The one place a Zep answer becomes a value or a ProviderError, for both wire variants.

Zep authenticates every version with `Authorization: Api-Key <key>`. v4 asks for an `Idempotency-Key`
on every mutating call; memfed derives it from its own write id (`Call.idempotency`), so the same
memfed write sent again is the same request to Zep. A 429 carries `Retry-After` (free plans answer
`retry-after: 60`), handed to the breaker in `ProviderRateLimited`. Wire facts: shared/vendors/zep.md.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from adapters.base import (
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
)

log = logging.getLogger("memfed.adapters.zep")

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Secret:
    """The vendor key; its repr and str never show it, so neither can a log line or a traceback."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class Call:
    """One request. `idempotency` is sent as `Idempotency-Key` where the variant takes one; `mutates`
    marks calls that change Zep (searches are POSTs that change nothing)."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    idempotency: str | None = None
    mutates: bool = False


@dataclass(frozen=True)
class Answer:
    body: Any
    headers: httpx.Headers


class NotFound(ProviderRejected):
    """Zep answered 404 to a call that expected the thing to exist (its graph may have been deleted at
    Zep, outside memfed: `Graphs.vanished` tells)."""


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()  # what `send` answers for a 404 when the caller allows that the thing is gone


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds, given as seconds or as an HTTP date."""
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
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _reached(exc: httpx.HTTPError) -> bool:
    return not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


class Http:
    """Sends calls through the injected client; every failure is mapped here."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, key: Secret, timeout: float,
                 idempotency_keys: bool, at_once: int = 16) -> None:
        self._client = client
        self._bound = asyncio.Semaphore(at_once)  # calls in flight to Zep from this provider
        self.base = base_url.rstrip("/")
        self._key = key
        self._timeout = timeout
        self._idempotency_keys = idempotency_keys

    def __repr__(self) -> str:
        return f"<zep http {self.base}>"

    def _scrub(self, text: str) -> str:
        secret = self._key.reveal()
        return text.replace(secret, "[redacted]") if secret else text

    def headers(self, call: Call) -> dict[str, str]:
        out = {"Authorization": f"Api-Key {self._key.reveal()}", "Accept": "application/json"}
        if call.json is not None:
            out["Content-Type"] = "application/json"
        if self._idempotency_keys and call.method in MUTATING:
            # v4 takes a key on every POST, PATCH and DELETE, as its SDK sends one; a read sent as a POST
            # (a search, a list) gets a fresh one, so Zep never answers it from an earlier read's key.
            out["Idempotency-Key"] = call.idempotency or f"memfed-read-{uuid.uuid4().hex}"
        return out

    async def send(self, call: Call, *, absent_ok: bool = False) -> Any:
        return (await self.exchange(call, absent_ok=absent_ok)).body

    async def exchange(self, call: Call, *, absent_ok: bool = False) -> Answer:
        async with self._bound:
            return await self._exchange(call, absent_ok=absent_ok)

    async def _exchange(self, call: Call, *, absent_ok: bool) -> Answer:
        what = f"{call.method} {call.path}"
        started = time.perf_counter()
        try:
            response = await self._client.request(
                call.method, self.base + call.path, params=call.params,
                content=orjson.dumps(call.json) if call.json is not None else None,
                headers=self.headers(call), timeout=self._timeout, follow_redirects=False,
            )
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"zep did not answer {what} within {self._timeout}s",
                                  maybe_applied=_reached(exc)) from exc
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(f"zep could not be reached for {what}: {type(exc).__name__}",
                                      maybe_applied=_reached(exc)) from exc
        status = response.status_code
        log.debug("zep %s -> %d in %.0f ms", what, status, (time.perf_counter() - started) * 1000)
        if status == 404:
            if absent_ok:
                return Answer(ABSENT, response.headers)
            raise NotFound(f"zep has no such thing for {what}: {self._detail(response)}")
        if status == 429:
            raise ProviderRateLimited(f"zep is rate limiting {what}",
                                      retry_after=retry_after(response.headers.get("retry-after")))
        if status in (401, 403):
            raise ProviderUnauthorized(f"zep refused memfed's credential for {what} ({status})")
        if 400 <= status < 500:
            raise ProviderRejected(f"zep refused {what} ({status}): {self._detail(response)}")
        if not 200 <= status < 300:
            raise ProviderUnavailable(f"zep failed {what} ({status}): {self._detail(response)}")
        if not response.content:
            return Answer(None, response.headers)
        try:
            return Answer(orjson.loads(response.content), response.headers)
        except orjson.JSONDecodeError as exc:
            raise ProviderUnavailable(f"zep answered {what} with something that is not JSON") from exc

    def _detail(self, response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return " ".join(self._scrub(response.text).split())[:200]
        error = body.get("error") if isinstance(body, Mapping) else None
        if isinstance(error, Mapping):  # v4: {"error": {"code", "message", ...}}
            return self._scrub(f"{error.get('code')}: {error.get('message')}")[:200]
        return " ".join(self._scrub(str(body)).split())[:200]
