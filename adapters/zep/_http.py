"""The one place a Zep answer becomes a value or a ProviderError, for both wire variants.

Zep authenticates every version with `Authorization: Api-Key <key>`. v4 asks for an `Idempotency-Key`
on every mutating call; memfed derives it from its own write id (`Call.idempotency`), so the same
memfed write sent again is the same request to Zep. A 429 carries `Retry-After` (free plans answer
`retry-after: 60`), handed to the breaker in `ProviderRateLimited`. Wire facts: shared/vendors/zep.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from adapters import vendor_http
from adapters.base import ProviderRejected
from adapters.vendor_http import ABSENT as ABSENT
from adapters.vendor_http import Secret as Secret

log = logging.getLogger("memfed.adapters.zep")

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Call(vendor_http.Request):
    """One request. `idempotency` is sent as `Idempotency-Key` where the variant takes one; `mutates`
    marks calls that change Zep (searches are POSTs that change nothing)."""

    idempotency: str | None = None
    mutates: bool = False


@dataclass(frozen=True)
class Answer:
    body: Any
    headers: httpx.Headers


class NotFound(ProviderRejected):
    """Zep answered 404 to a call that expected the thing to exist (its graph may have been deleted at
    Zep, outside memfed: `Graphs.vanished` tells)."""


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

    def headers(self, call: Call) -> dict[str, str]:
        out = {"Authorization": f"Api-Key {self._key.reveal()}", "Accept": "application/json"}
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
        response = await vendor_http.request(self._client, "zep", call.method, self.base + call.path, what=what,
                                             headers=self.headers(call), within=self._timeout, key=self._key,
                                             params=call.params, json=call.json)
        status = response.status_code
        log.debug("zep %s -> %d in %.0f ms", what, status, (time.perf_counter() - started) * 1000)
        if status == 404:
            if absent_ok:
                return Answer(ABSENT, response.headers)
            raise NotFound(f"zep has no such thing for {what}: {self._detail(response)}")
        if not 200 <= status < 300:
            raise vendor_http.failure("zep", what, response, self._detail(response))
        return Answer(vendor_http.decoded("zep", what, response.content), response.headers)

    def _detail(self, response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return vendor_http.redacted(response.text, self._key)
        error = body.get("error") if isinstance(body, Mapping) else None
        if isinstance(error, Mapping):  # v4: {"error": {"code", "message", ...}}
            return vendor_http.redacted(f"{error.get('code')}: {error.get('message')}", self._key)
        return vendor_http.redacted(str(body), self._key)
