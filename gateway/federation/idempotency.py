"""`Idempotency-Key` on writes: a repeated key returns the first answer without doing the work again.

Keys are per principal and kept at least `keep_hours` (24 by default). A key reused with a different
request is refused rather than silently answered with the other request's result.

The key is claimed in the state database before the work runs (gateway/state/idempotency_keys.py), so the
rule holds across every gateway that shares the database: a repeat while the first request runs waits
for it and replays its answer (a repeat in the same process waits on a lock, one in another polls the
row). The claim is a lease, renewed while the request runs; a gateway that dies holding it (kill -9)
lets it run out, and the next repeat takes the key over as a write whose outcome is unknown.

Every way a run ends is kept: an answer below 500 is replayed; a 5xx after which nothing was written
(`failed`) lets the next repeat run again; a 5xx whose write may have reached the provider
(`detail.outcome: "unknown"`, see gateway/federation/writes.py) keeps its write id, and the next repeat looks for
that write before it writes anything (gateway/api/_writes.py, observe's job in gateway/api/agent.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

from gateway.base.answers import JSONAnswer
from gateway.base.clock import now_ms
from gateway.base.errors import ApiError, idempotency_key_in_use, idempotency_key_invalid, idempotency_key_reused
from gateway.federation.writes import Retry, WriteIntent, new_write_id
from gateway.state import idempotency_keys as keys
from gateway.state.store import StateStore

log = logging.getLogger("memfed.idempotency")

WAIT_LIMIT = 60.0  # seconds a repeat waits for the first request before it is told to come back
_POLL_FIRST, _POLL_MAX = 0.02, 0.5


@dataclass
class _Turn:
    """Requests of this process holding or waiting for one key: they go one at a time."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass(frozen=True)
class _Claim:
    owner: str
    intent: WriteIntent


class Idempotency:
    def __init__(self, store: StateStore, keep_hours: int = 24, lease_seconds: float = 15.0) -> None:
        self.store = store
        self.keep_ms = keep_hours * 3600 * 1000
        self.lease_ms = int(lease_seconds * 1000)
        self._instance = secrets.token_hex(6)
        self._locks: dict[tuple[str, str], _Turn] = {}

    async def run(self, principal: str, key: str, fingerprint: str, claimed: Callable[[WriteIntent], None],
                  work: Callable[[], Awaitable[Response]]) -> Response:
        """`work` once for `principal`'s `key`: a repeat replays its answer. `fingerprint` tells the same
        request from another one reusing the key; `claimed` is told the write id the work must carry."""
        if len(key) > 255:
            raise idempotency_key_invalid()
        waited_until = time.monotonic() + WAIT_LIMIT
        async with self._turn(principal, key, waited_until):
            taken = await self._claim(principal, key, fingerprint, waited_until)
            if isinstance(taken, Response):
                return taken
            claimed(taken.intent)
            return await self._run_claimed(principal, key, taken, work)

    # ------------------------------------------------------------------ taking the key

    @contextlib.asynccontextmanager
    async def _turn(self, principal: str, key: str, waited_until: float) -> AsyncIterator[None]:
        turn = self._locks.setdefault((principal, key), _Turn())
        turn.users += 1
        try:
            try:
                async with asyncio.timeout(max(0.0, waited_until - time.monotonic())):
                    await turn.lock.acquire()
            except TimeoutError:
                raise _still_running() from None
            try:
                yield
            finally:
                turn.lock.release()
        finally:
            # The entry goes with its last user, whatever the request's outcome: nothing is left behind.
            turn.users -= 1
            if turn.users == 0:
                self._locks.pop((principal, key), None)

    async def _claim(self, principal: str, key: str, fingerprint: str, waited_until: float) -> _Claim | Response:
        """Hold the key for this run, or the answer to give instead (a replay)."""
        engine = self.store.engine
        pause = _POLL_FIRST
        while True:
            now = now_ms()
            owner = f"{self._instance}-{secrets.token_hex(6)}"
            # Read first: a repeat (the common case for a key seen before) then costs no failed insert.
            row = await keys.read(engine, principal, key)
            if row is None:
                write_id = new_write_id()
                if await keys.claim(engine, principal, key, fingerprint=fingerprint, write_id=write_id,
                                    owner=owner, lease_until=now + self.lease_ms, now=now):
                    return _Claim(owner, WriteIntent(write_id))
                continue  # another request claimed it between the two statements: read what it holds
            if now - row.created_at >= self.keep_ms:
                await keys.forget_expired(engine, row)
                continue
            if row.fingerprint != fingerprint:
                raise idempotency_key_reused()
            if row.state == keys.DONE:
                replay = JSONAnswer(json.loads(row.body or "null"), status_code=row.status or 200)
                replay.headers["idempotent-replayed"] = "true"
                return replay
            if row.state == keys.RUNNING and row.lease_until > now:
                # Another gateway runs it now: wait for its answer.
                if time.monotonic() + pause > waited_until:
                    raise _still_running()
                await asyncio.sleep(pause)
                pause = min(_POLL_MAX, pause * 2)
                continue
            if not await keys.take_over(engine, row, owner=owner, lease_until=now + self.lease_ms):
                continue
            # failed: nothing reached a provider. unknown: it may have, until unknown_since. running under a
            # lease that ran out: its gateway died, perhaps mid-call, at the latest when the lease ended.
            since = row.unknown_since if row.state == keys.UNKNOWN else None
            if row.state == keys.RUNNING:
                since = row.lease_until
                log.info("took over an Idempotency-Key whose gateway stopped renewing it")
            return _Claim(owner, WriteIntent(row.write_id, retry=Retry(since)))

    # ------------------------------------------------------------------ running and keeping the outcome

    async def _run_claimed(self, principal: str, key: str, claim: _Claim,
                           work: Callable[[], Awaitable[Response]]) -> Response:
        renewing = asyncio.create_task(self._renew(principal, key, claim.owner))
        try:
            response = await work()
        except ApiError as error:
            await self._keep_error(principal, key, claim, error)
            raise
        except asyncio.CancelledError:
            raise  # the lease runs out; the next repeat takes the key over as an unknown outcome
        except Exception:
            await self._finish(principal, key, claim, keys.UNKNOWN, unknown_since=claim.intent.unknown_since(now_ms()))
            raise
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        if isinstance(response, JSONResponse) and response.status_code < 500:
            await self._finish(principal, key, claim, keys.DONE, status=response.status_code,
                               body=bytes(response.body).decode())
        else:
            # A 5xx answer, or one that cannot be replayed (not JSON): a repeat runs the request again.
            await self._finish(principal, key, claim, keys.FAILED, status=response.status_code)
        return response

    async def _keep_error(self, principal: str, key: str, claim: _Claim, error: ApiError) -> None:
        detail = error.detail if isinstance(error.detail, dict) else {}
        if detail.get("outcome") == "unknown":
            await self._finish(principal, key, claim, keys.UNKNOWN, unknown_since=claim.intent.unknown_since(now_ms()))
        elif error.status < 500:
            body = bytes(error.response().body).decode()
            await self._finish(principal, key, claim, keys.DONE, status=error.status, body=body)
        else:
            await self._finish(principal, key, claim, keys.FAILED, status=error.status)

    async def _finish(self, principal: str, key: str, claim: _Claim, state: str, **values: Any) -> None:
        if not await keys.finish(self.store.engine, principal, key, owner=claim.owner, state=state, **values):
            log.warning("an Idempotency-Key was taken over while its request still ran; its outcome is not kept")

    async def _renew(self, principal: str, key: str, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                renewed = await keys.renew(self.store.engine, principal, key, owner=owner,
                                           lease_until=now_ms() + self.lease_ms)
            except Exception:  # a state store hiccup: try again at the next beat, the lease still runs
                log.warning("renewing an Idempotency-Key's lease failed", exc_info=True)
                continue
            if not renewed:
                return


def _still_running() -> ApiError:
    return idempotency_key_in_use()
