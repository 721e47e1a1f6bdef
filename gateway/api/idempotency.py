"""`Idempotency-Key` on writes: a repeated key returns the first answer without doing the work again.

Keys are per principal and kept at least `keep_hours` (24 by default). A key reused with a different
request is refused rather than silently answered with the other request's result. A second request
with a key whose first request is still running waits for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse, Response

from gateway.answers import JSONAnswer
from gateway.errors import ApiError
from gateway.state import schema as t
from gateway.state.store import StateStore, now_ms


class Idempotency:
    def __init__(self, store: StateStore, keep_hours: int = 24) -> None:
        self.store = store
        self.keep_ms = keep_hours * 3600 * 1000
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def run(self, call: Any, endpoint: Any, work: Callable[[], Awaitable[Response]]) -> Response:
        key = call.request.headers["idempotency-key"]
        if len(key) > 255:
            raise ApiError(400, "memfed_invalid_idempotency_key", "Idempotency-Key is at most 255 characters.",
                           param="Idempotency-Key")
        principal = call.principal.principal
        fingerprint = hashlib.sha256(
            f"{endpoint.method} {call.request.url.path}\n".encode() + await call.request.body()
        ).hexdigest()
        lock = self._locks.setdefault((principal, key), asyncio.Lock())
        async with lock:
            row = await self.store.fetch_one(t.idempotency, principal=principal, key=key)
            if row is not None and now_ms() - row.created_at < self.keep_ms:
                if row.fingerprint != fingerprint:
                    raise ApiError(422, "memfed_idempotency_key_reused",
                                   "This Idempotency-Key was used with a different request.",
                                   param="Idempotency-Key")
                replay = JSONAnswer(json.loads(row.body), status_code=row.status)
                replay.headers["idempotent-replayed"] = "true"
                return replay
            response = await work()
            if response.status_code < 500 and isinstance(response, JSONResponse):
                if row is not None:
                    await self.store.delete_rows(t.idempotency, principal=principal, key=key)
                await self.store.insert(
                    t.idempotency, principal=principal, key=key, fingerprint=fingerprint,
                    status=response.status_code, body=bytes(response.body).decode(), created_at=now_ms(),
                )
        self._locks.pop((principal, key), None)
        return response
