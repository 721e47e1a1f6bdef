"""The observe outbox: episodes are committed here before their provider is asked, so none is lost.

`observe` (§5.1) hands raw episodes to a memory's provider. A provider can be down, slow or resting
behind its breaker; a turn that ended meanwhile must still be recorded. So every episode is first a
row in `observe_outbox` (committed with its job), then sent; a send that fails for a reason that can
pass (unavailable, timeout, rate limited, breaker open) leaves the row pending with a next attempt
time that backs off, and the background worker (started by the app's lifespan) sends it later, first
thing after a restart included.

Exactly once, as far as the provider lets us see. A row is claimed (attempts + 1 and a lease,
committed) before each send, so a second sender skips it. A send can still succeed at the provider
and be lost before the row is marked delivered (a timeout whose request did land, a crash). So every
episode is written with its outbox id as its write id (gateway/federation/writes.py), and also carries it in
`attributes["x.memfed.outbox_id"]`; a row that may have been sent before (attempts already above zero
at the claim) is first looked for at the provider by that id (`find_write`, or for a provider without
it a recall filtered on the attribute); it is sent again only if it is not there. A send whose outcome
is unknown (it may have reached the provider) is not tried again before the provider's `write_settle`
has passed, even by the first pass after a restart: a vendor that applies a request after memfed gave
up on it has that long to show it. The bound that remains: a write the vendor applies (or makes
visible to reads) later than that can arrive twice.

`attempts` counts the sends that may have reached the provider: one that never left (a refused
connection, a breaker at rest, a 429) is given back. A row whose sends keep reaching the provider and
failing (a 5xx, a timeout, an adapter that cannot carry the episode) ends `failed` with its reason
after MAX_ATTEMPTS, so the memory's later episodes are no longer held behind it.

A delivered row keeps the record id and drops the episode's content (an erase at the provider must
not leave a copy here). A row the provider refused outright (rejected, unsupported) or whose memory
was deleted is `failed` and never retried; its job says so. A provider that cannot be reached keeps
its memory's rows pending, in order, for as long as it is configured.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select, update

from adapters.base import (
    Condition,
    FindsWrites,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RecallQuery,
    Record,
    Unsupported,
)
from gateway.agent.background import Worker
from gateway.agent.episodes import EPISODE as EPISODE
from gateway.agent.episodes import OUTBOX_ATTRIBUTE as OUTBOX_ATTRIBUTE
from gateway.agent.episodes import Episode as Episode
from gateway.agent.episodes import decode, encode
from gateway.base.clock import now_ms
from gateway.base.ids import new_id
from gateway.federation.writes import maybe_applied
from gateway.state import harness_schema as h

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("memfed.outbox")

BACKOFF_FIRST = 1.0  # seconds before the first retry; doubled per attempt
BACKOFF_CAP = 300.0
POLL = 5.0  # the worker looks at least this often (rows written by another process, schedules)
BATCH = 100
MAX_ATTEMPTS = 8  # sends that reached the provider and failed, before a row is given up as failed


@dataclass(frozen=True)
class Outcome:
    """What one send did: `delivered` (with the record), `retry` (kept), `failed` (given up), `skipped`."""

    kind: str
    record: Record | None = None
    error: ProviderError | None = None


# ------------------------------------------------------------------ writing and reading rows


@dataclass(frozen=True)
class Enqueued:
    """A committed job and its rows, in order; `claimed` rows are the caller's to send now."""

    job_id: str
    rows: tuple[SimpleNamespace, ...]
    claimed: bool


def job_id_for(write_id: str) -> str:
    """The job of an observe whose write is `write_id`: a repeat of the request finds the job it made."""
    return "hjob_" + write_id.split("_", 1)[-1]


async def enqueue(services: Services, memory_id: str, provider: str, episodes: Sequence[Episode],
                  created_by: str, job_id: str | None = None) -> Enqueued:
    """Commit a job and one outbox row per episode, in one transaction.

    When no earlier episode of this memory is still pending, the rows are committed already claimed
    by the caller, who sends them next (`send(..., row=...)`) and `release`s what it did not send. When
    one is, they are left to the worker, behind it, so a memory's episodes arrive in order. Both
    decisions ride in the one transaction: each commit of the state store is an fsync."""
    stamp = now_ms()
    job_id = job_id or new_id("job")
    o = h.observe_outbox
    async with services.store.engine.begin() as conn:
        waiting = await conn.execute(select(o.c.id).where(o.c.memory_id == memory_id, o.c.status == "pending")
                                     .limit(1))
        claim = waiting.first() is None
        lease = stamp + _lease_ms(services, provider) if claim else 0
        rows = [{"id": "hobx_" + secrets.token_hex(16), "job_id": job_id, "seq": index, "memory_id": memory_id,
                 "provider": provider, "payload": encode(episode), "status": "pending", "attempts": int(claim),
                 "next_attempt_at": stamp, "lease_until": lease, "last_error": "", "record_id": None,
                 "created_at": stamp, "delivered_at": None}
                for index, episode in enumerate(episodes)]
        await conn.execute(insert(h.observe_jobs).values(
            id=job_id, memory_id=memory_id, status="pending", record_ids="[]", episodes=len(rows), error="",
            created_by=created_by, created_at=stamp, updated_at=stamp))
        await conn.execute(insert(o), rows)
    return Enqueued(job_id, tuple(SimpleNamespace(**r) for r in rows), claim)


async def release(services: Services, row_ids: Sequence[str]) -> None:
    """Give back rows claimed at `enqueue` and never sent, as if never claimed: the worker sends them."""
    if not row_ids:
        return
    o = h.observe_outbox
    async with services.store.engine.begin() as conn:
        await conn.execute(update(o).where(o.c.id.in_(list(row_ids)), o.c.status == "pending")
                           .values(lease_until=0, attempts=0))


async def job_row(services: Services, job_id: str) -> Any:
    return await services.store.rows.fetch_one(h.observe_jobs, id=job_id)


async def _refresh_job(conn: Any, job_id: str) -> None:
    o = h.observe_outbox
    rows = list(await conn.execute(select(o.c.status, o.c.record_id, o.c.last_error)
                                   .where(o.c.job_id == job_id).order_by(o.c.seq)))
    statuses = {r.status for r in rows}
    status = "failed" if "failed" in statuses else "pending" if "pending" in statuses else "completed"
    error = next((r.last_error for r in rows if r.status == "failed"), "")
    ids = [r.record_id for r in rows if r.status == "delivered" and r.record_id]
    await conn.execute(update(h.observe_jobs).where(h.observe_jobs.c.id == job_id).values(
        status=status, record_ids=json.dumps(ids), error=error, updated_at=now_ms()))


# ------------------------------------------------------------------ sending one row


def _lease_ms(services: Services, provider: str) -> int:
    handle = services.providers.get(provider)
    seconds = handle.config.timeout if handle is not None else 2.0
    # One send is at most a dedupe read (two tries) and a write (one), each bounded by the timeout:
    # a lease of four timeouts, and never under the configured claim lease, outlasts it. A sender that
    # died mid-send may have reached the provider at its lease's end: the write then has its settle time.
    return int((max(services.config.write_lease_seconds, 4 * seconds) + _settle(handle)) * 1000)


def _settle(handle: Any) -> float:
    return handle.config.settle_seconds() if handle is not None else 0.0


async def _claim(services: Services, row_id: str, provider: str) -> Any:
    """Take the row for one send, or None when it is delivered, failed, or another sender holds it."""
    o = h.observe_outbox
    stamp = now_ms()
    async with services.store.engine.begin() as conn:
        claimed = await conn.execute(
            update(o).where(o.c.id == row_id, o.c.status == "pending", o.c.lease_until < stamp)
            .values(attempts=o.c.attempts + 1, lease_until=stamp + _lease_ms(services, provider)))
        if not claimed.rowcount:
            return None
        return (await conn.execute(select(o).where(o.c.id == row_id))).first()


async def _finish(services: Services, row: Any, **values: Any) -> None:
    async with services.store.engine.begin() as conn:
        await conn.execute(update(h.observe_outbox).where(h.observe_outbox.c.id == row.id).values(**values))
        await _refresh_job(conn, row.job_id)


def _backoff(attempts: int, error: ProviderError) -> float:
    if isinstance(error, ProviderRateLimited) and error.retry_after:
        return min(BACKOFF_CAP, float(error.retry_after))
    return min(BACKOFF_CAP, BACKOFF_FIRST * 2.0 ** max(0, attempts - 1))


async def _already_there(handle: Any, memory_id: str, outbox_id: str) -> Record | None:
    """The episode an earlier send of this row left at the provider, if any: by its write id, or where the
    provider cannot find writes, by a recall on its outbox attribute."""
    if isinstance(handle.provider, FindsWrites):
        found: Record | None = await handle.call(lambda p: p.find_write(memory_id, outbox_id), read=True)
        return found
    query = RecallQuery(filters=(Condition(f"attributes.{OUTBOX_ATTRIBUTE}", "eq", outbox_id),),
                        types=(EPISODE,), include="all", limit=1)
    answer = await handle.call(lambda p: p.recall([memory_id], query), read=True)
    return answer.hits[0].record if answer.hits else None


async def send(services: Services, row_id: str, provider: str, *, row: Any = None) -> Outcome:
    """Claim the row (or take `row`, claimed at `enqueue` by the caller) and send its episode to the
    memory's provider; record what happened."""
    row = row if row is not None else await _claim(services, row_id, provider)
    if row is None:
        return Outcome("skipped")
    node = services.store.tree.get(row.memory_id)
    if node is None:
        await services.store.catch_up()  # deleted, or created by another instance this one has not seen yet
        node = services.store.tree.get(row.memory_id)
    if node is None:
        await _finish(services, row, status="failed", last_error="the memory was deleted", lease_until=0,
                      payload="")
        return Outcome("failed", error=ProviderRejected("the memory was deleted"))
    handle = services.providers.get(node.provider)
    try:
        if handle is None:
            raise ProviderUnavailable(f"provider {node.provider} is not connected", maybe_applied=False)
        found = await _already_there(handle, node.id, row.id) if row.attempts > 1 else None
    except (ProviderUnavailable, ProviderTimeout) as exc:  # the look-up sent nothing: no attempt is used up
        return await _again(services, row, node.provider, exc, reached=False)
    except Exception as exc:  # a look-up refused every time must not hold the row (and its memory) for ever
        return await _again(services, row, node.provider, exc, reached=True)
    try:
        if found is None:
            new = decode(row.payload, row.id)
            found = await handle.call(lambda p: p.remember(node.id, new), read=False)
    except (ProviderRejected, Unsupported) as exc:
        await _finish(services, row, status="failed", last_error=str(exc) or exc.reason, lease_until=0)
        return Outcome("failed", error=exc)
    except Exception as exc:  # any other failure may pass: the row is kept and retried
        return await _again(services, row, node.provider, exc, reached=maybe_applied(exc), settle=_settle(handle))
    # The episode now lives at the provider; its copy here is dropped so that an erase there is not
    # undone by a payload kept here.
    await _finish(services, row, status="delivered", record_id=found.id, delivered_at=now_ms(), lease_until=0,
                  last_error="", payload="")
    return Outcome("delivered", record=found)


async def _again(services: Services, row: Any, provider: str, exc: Exception, *, reached: bool,
                 settle: float = 0.0) -> Outcome:
    """Keep the row for a later attempt after this one failed, or give it up after MAX_ATTEMPTS sends that
    reached the provider. `reached`: the send may have arrived (and may still be applied)."""
    error = exc if isinstance(exc, ProviderError) else ProviderUnavailable(type(exc).__name__)
    if not isinstance(exc, ProviderUnavailable | ProviderTimeout):
        log.warning("sending outbox row %s to %s failed unexpectedly: %r", row.id, provider, exc)
    reason = f"{error.reason}: {error}"[:400]
    stamp = now_ms()
    if not reached:
        attempts = max(0, row.attempts - 1)  # what never left is no attempt
        # Backed off by the row's age, as attempts no longer count: a provider away for an hour is asked
        # every BACKOFF_CAP, one away for a second again soon.
        delay = _backoff(0, error) if isinstance(error, ProviderRateLimited) and error.retry_after else min(
            BACKOFF_CAP, max(BACKOFF_FIRST, (stamp - row.created_at) / 2000))
        await _finish(services, row, attempts=attempts, last_error=reason, lease_until=0,
                      next_attempt_at=stamp + int(delay * 1000))
        return Outcome("retry", error=error)
    if row.attempts >= MAX_ATTEMPTS:
        await _finish(services, row, status="failed", lease_until=0,
                      last_error=f"given up after {row.attempts} attempts that reached the provider: {reason}")
        return Outcome("failed", error=error)
    # The write may still land: no sender, the first pass after a restart included, tries before it settled.
    delay = max(_backoff(row.attempts, error), settle)
    await _finish(services, row, last_error=reason, lease_until=stamp + int(settle * 1000),
                  next_attempt_at=stamp + int(delay * 1000))
    return Outcome("retry", error=error)


async def deliver_due(services: Services, *, ignore_schedule: bool = False) -> int:
    """One pass over the rows due now (all pending rows when `ignore_schedule`); returns how many were
    delivered. After one failure for a memory, that memory's later rows wait, so order is kept."""
    o = h.observe_outbox
    stamp = now_ms()
    query = select(o.c.id, o.c.memory_id, o.c.provider).where(o.c.status == "pending", o.c.lease_until < stamp)
    if not ignore_schedule:
        query = query.where(o.c.next_attempt_at <= stamp)
    async with services.store.engine.connect() as conn:
        due = list(await conn.execute(query.order_by(o.c.created_at, o.c.job_id, o.c.seq).limit(BATCH)))
    blocked: set[str] = set()
    delivered = 0
    for row in due:
        if row.memory_id in blocked:
            continue
        outcome = await send(services, row.id, row.provider)
        if outcome.kind == "delivered":
            delivered += 1
        elif outcome.kind == "retry":
            blocked.add(row.memory_id)
    return delivered


async def backlog(services: Services) -> tuple[int, int | None]:
    """Rows not yet delivered, and when the oldest of them was made (ms; None: there is none)."""
    o = h.observe_outbox
    async with services.store.engine.connect() as conn:
        row = (await conn.execute(select(func.count(), func.min(o.c.created_at)).where(o.c.status == "pending"))).one()
    return int(row[0]), None if row[1] is None else int(row[1])


async def pending_count(services: Services) -> int:
    o = h.observe_outbox
    async with services.store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).where(o.c.status == "pending"))).scalar_one())


async def _next_due_in(services: Services) -> float:
    o = h.observe_outbox
    async with services.store.engine.connect() as conn:
        first = (await conn.execute(select(func.min(o.c.next_attempt_at)).where(o.c.status == "pending"))).scalar()
    if first is None:
        return POLL
    return min(POLL, max(0.05, (int(first) - now_ms()) / 1000))


# ------------------------------------------------------------------ the background worker


async def _next_wait(services: Services) -> tuple[float, bool]:
    """How long the worker may sleep, and whether nothing is left to send now."""
    return await _next_due_in(services), await _nothing_due(services)


async def _nothing_due(services: Services) -> bool:
    o = h.observe_outbox
    stamp = now_ms()
    async with services.store.engine.connect() as conn:
        found = await conn.execute(select(o.c.id).where(
            o.c.status == "pending", o.c.next_attempt_at <= stamp, o.c.lease_until < stamp).limit(1))
        return found.first() is None


_workers: dict[int, Worker] = {}


async def start_background(services: Services) -> Worker:
    """Start the worker for these services (the app's lifespan calls this once)."""
    worker = _workers.get(id(services))
    if worker is None:
        worker = _workers[id(services)] = Worker(
            "memfed-outbox", lambda first: deliver_due(services, ignore_schedule=first),
            lambda: _next_wait(services), POLL)
        worker.start()
    return worker


async def stop_background(services: Services) -> None:
    worker = _workers.pop(id(services), None)
    if worker is not None:
        await worker.stop()


def wake(services: Services) -> None:
    worker = _workers.get(id(services))
    if worker is not None:
        worker.wake()


def worker_for(services: Services) -> Worker | None:
    return _workers.get(id(services))


