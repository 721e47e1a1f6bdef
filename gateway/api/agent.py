"""A memory as a harness reaches it (§5.1, §9.1): prime, observe, and the jobs an observe leaves.

- `GET /v1/memories/{id}/prime?budget=N` reads the memory's standing records (active records whose
  `attributes.standing` is true) and renders them, with the memory's name, description and readable
  children, as the fenced "Memory" section (gateway/agent/prime.py). What it placed is logged in tokens.
- `POST /v1/memories/{id}/observe` appends episodes through the outbox (gateway/agent/outbox.py): sent at
  once when the provider answers, kept and sent later when it does not, and never lost.
- `GET /v1/memories/{id}/jobs/{job}` is what an observe that answered 202 has written since.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from starlette.responses import JSONResponse

from adapters import degraded as entries
from adapters.base import Condition, Page, Provider, ProviderError, RecallQuery, Record, Unsupported
from adapters.context import ContextProvider
from adapters.deriving import DerivingProvider
from gateway.agent import outbox
from gateway.agent import prime as priming
from gateway.api._calls import handle_for, on_provider
from gateway.api._endpoint import Call, Endpoint
from gateway.api._writes import write_intent
from gateway.api.agent_models import Observe, PrimeQuery
from gateway.api.guard import require
from gateway.api.records import parts_from, writer_for
from gateway.api.render import Reader, reader, record_json, written_json
from gateway.api.responses_agent import JobOut, ObservationOut, PrimeOut
from gateway.base.answers import JSONAnswer
from gateway.base.clock import now, now_ms
from gateway.base.errors import ApiError, job_not_found, provider_refused, unsupported
from gateway.state.harnesses import Placed
from gateway.state.tree import MemoryNode
from policies import access

if TYPE_CHECKING:
    from gateway.services import Services

STANDING_LIMIT = 200  # standing records read per memory; more than a budget could hold anyway
LIST_PAGE = 100
LIST_PAGES = 20  # a provider without filters is scanned at most this far, newest first

# What a refused reference in an observed record is audited as (gateway/api/render.py `reader`).
OBSERVED = "memories.observe.reference"


# ------------------------------------------------------------------ prime


def _standing(records: Sequence[Record], memory_id: str) -> list[Record]:
    kept = [r for r in records
            if r.memory_id == memory_id and r.status == "active" and r.attributes.get("standing") is True]
    kept.sort(key=lambda r: (r.time.written_at, r.id), reverse=True)
    return kept[:STANDING_LIMIT]


def _context_of(memory_id: str) -> Callable[[Provider], Awaitable[Sequence[Record]]]:
    async def run(provider: Provider) -> Sequence[Record]:
        if not isinstance(provider, ContextProvider):  # the provider changed under the request
            raise Unsupported("The memory's provider has no context recall.")
        return await provider.context_records(memory_id)
    return run


async def standing_records(services: Services, node: MemoryNode) -> list[Record]:
    """The memory's standing records, newest first. A provider with a context recall of its own
    (adapters/context.py: a memory-provider plugin's budgeted Recall) is asked for what it would place,
    in its order; one that filters is asked for them; one that does neither is listed (newest first,
    bounded) and filtered here."""
    if isinstance(handle_for(services, node).provider, ContextProvider):
        placed = await on_provider(services, node, _context_of(node.id), read=True)
        return [r for r in placed if r.memory_id == node.id][:STANDING_LIMIT]
    if "filters" in handle_for(services, node).capabilities().signals:
        query = RecallQuery(filters=(Condition("attributes.standing", "eq", True),), limit=STANDING_LIMIT)
        answer = await on_provider(services, node, lambda p: p.recall([node.id], query), read=True)
        return _standing([hit.record for hit in answer.hits], node.id)
    found: list[Record] = []
    cursor: str | None = None

    def page_at(at: str | None) -> Callable[[Provider], Awaitable[Page]]:
        return lambda p: p.list(node.id, cursor=at, limit=LIST_PAGE)

    for _ in range(LIST_PAGES):
        page = await on_provider(services, node, page_at(cursor), read=True)
        found.extend(page.items)
        cursor = page.next
        if cursor is None:
            break
    return _standing(found, node.id)


async def prime_memory(services: Services, shown: Reader, node: MemoryNode, privileges: frozenset[str], *,
                       default: bool = False, tolerate: bool = False) -> priming.PrimeMemory:
    """One memory as the renderer takes it, read for `shown`'s principals. With `tolerate`, a provider
    failure becomes the memory's `problem` (a harness's prime goes on with the other memories)."""
    tree, principals = shown.tree, shown.principals
    children = tuple(
        priming.Child(child.id, child.name, child.description)
        for child in (tree.get(c) for c in access.readable_children(tree, principals, node.id))
        if child is not None
    )
    readable = "read" in privileges
    records: list[dict[str, Any]] = []
    problem = None
    if readable:
        try:
            records = [record_json(r, shown, node.id) for r in await standing_records(services, node)]
        except ApiError as error:
            if not tolerate:
                raise
            detail = error.detail if isinstance(error.detail, dict) else {}
            problem = f"{error.code}: {detail.get('reason', 'no answer')}"
    return priming.PrimeMemory(
        id=node.id, name=node.name, description=node.description,
        privileges=tuple(p for p in access.PRIVILEGES if p in privileges), children=children,
        records=tuple(records), default=default, readable=readable, problem=problem,
    )


async def log_prime(call: Call, primed: priming.Primed, principal: str, harness_id: str | None) -> None:
    """What was placed, per memory, in tokens (§9.1): kept with the request that placed it."""
    stamp = now_ms()
    await call.services.store.prime_log.keep([
        Placed(call.request_id, harness_id, p.memory_id, principal, p.tokens, p.records_placed, primed.budget,
               priming.TOKENIZER, stamp) for p in primed.memories])


async def prime(call: Call) -> dict[str, Any]:
    query = call.query_as(PrimeQuery)
    node = require(call, call.path["memory_id"], "read", "memories.prime")
    tree = call.services.store.tree
    principals = call.authenticated().principals
    memory = await prime_memory(call.services, reader(call, "memories.prime.reference"), node,
                                access.effective(tree, principals, node.id))
    primed = priming.render([memory], query.budget)
    await log_prime(call, primed, call.authenticated().principal, None)
    return {"object": "memory.prime", "memory_id": node.id, **primed.document()}


# ------------------------------------------------------------------ observe


def _refusal(node: MemoryNode, error: ProviderError | None) -> ApiError:
    if isinstance(error, Unsupported):
        return unsupported(str(error) or "The memory's provider does not keep episodes.")
    reason = error.reason if error is not None else "rejected"
    return provider_refused(node.provider, reason, "The memory's provider refused the episode.")


def _deferred(services: Services, node: MemoryNode) -> bool:
    """A provider that derives after it answers (§5.1) is answered with a job, never with records."""
    caps = handle_for(services, node).capabilities()
    return caps.observe_answers == "job" or caps.derivation == "background"


async def observe_episodes(call: Call, node: MemoryNode, episodes: Sequence[outbox.Episode],
                           extra: dict[str, Any] | None = None) -> JSONResponse:
    """Commit the episodes to the outbox, send them now unless earlier ones of this memory still wait,
    and answer 201 with the records, or 202 with the job that will carry them."""
    services = call.services
    deferred = _deferred(services, node)
    intent = write_intent(call)
    job_id = outbox.job_id_for(intent.write_id)
    if intent.retry is not None:
        # A repeat of an observe whose first run ended without a kept answer: its job, if it was
        # committed, carries the episodes already, and the outbox delivers them once.
        earlier = await outbox.job_row(services, job_id)
        if earlier is not None:
            return await _observed_before(call, node, earlier, deferred, extra)
    queued = await outbox.enqueue(services, node.id, node.provider, episodes, call.authenticated().principal,
                                  job_id=job_id)
    written: list[Record] = []
    stopped: outbox.Outcome | None = None if queued.claimed else outbox.Outcome("retry")
    for index, row in enumerate(queued.rows if queued.claimed else ()):
        outcome = await outbox.send(services, row.id, node.provider, row=row)
        if outcome.kind != "delivered" or outcome.record is None:
            stopped = outcome
            await outbox.release(services, [r.id for r in queued.rows[index + 1 :]])
            break
        written.append(outcome.record)
    if stopped is not None and stopped.kind == "failed" and not written:
        raise _refusal(node, stopped.error)
    if stopped is not None:
        outbox.wake(services)
    body: dict[str, Any] = {"object": "memory.observation", "memory_id": node.id, **(extra or {})}
    if stopped is None and not deferred:
        shown = reader(call, OBSERVED)
        body.update(records=[written_json(r, shown, node.id) for r in written], job=None)
        return JSONAnswer(body, status_code=201)
    job = await outbox.job_row(services, job_id)
    body.update(records=[], job={"id": job_id, "status": job.status if job is not None else "pending"})
    return JSONAnswer(body, status_code=202)


async def _observed_before(call: Call, node: MemoryNode, job: Any, deferred: bool,
                           extra: dict[str, Any] | None) -> JSONResponse:
    """The answer to a repeated observe from the job its first run committed: 201 with the records once
    they are all delivered, else 202 with the job (the worker is woken for what is still pending)."""
    services = call.services
    body: dict[str, Any] = {"object": "memory.observation", "memory_id": node.id, **(extra or {})}
    if job.status == "completed" and not deferred:
        def read(record_id: str) -> Callable[[Provider], Awaitable[Record]]:
            return lambda p: p.get(node.id, record_id)

        try:
            written = [await on_provider(services, node, read(rid), read=True) for rid in json.loads(job.record_ids)]
        except ApiError:
            written = None  # the provider is away or the records were erased since: the job says what was done
        if written is not None:
            shown = reader(call, OBSERVED)
            body.update(records=[written_json(r, shown, node.id) for r in written], job=None)
            return JSONAnswer(body, status_code=201)
    outbox.wake(services)
    body.update(records=[], job={"id": job.id, "status": job.status})
    return JSONAnswer(body, status_code=202)


async def observe(call: Call) -> JSONResponse:
    body = call.body_as(Observe)
    node = require(call, call.path["memory_id"], "write", "memories.observe")
    writer, at = writer_for(call), now()
    episodes = [outbox.Episode(content=await parts_from(call, node, e.content), written_by=writer, written_at=at,
                               title=e.title, attributes=dict(e.attributes or {}))
                for e in body.all_episodes()]
    return await observe_episodes(call, node, episodes)


async def get_job(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "read", "memories.job")
    row = await outbox.job_row(call.services, call.path["job_id"])
    if row is None or row.memory_id != node.id:
        raise job_not_found()
    record_ids: list[str] = json.loads(row.record_ids)
    out: dict[str, Any] = {
        "id": row.id, "object": "memory.job", "memory_id": node.id, "status": row.status,
        "episodes": row.episodes, "record_ids": record_ids, "records": [], "error": row.error or None,
        "created_at": row.created_at, "updated_at": row.updated_at,
    }
    shown = reader(call, "memories.job.reference")

    def read(record_id: str) -> Callable[[Provider], Awaitable[Record]]:
        return lambda p: p.get(node.id, record_id)

    if row.status == "completed" and await _still_deriving(call.services, node, record_ids):
        # Delivered, but the provider derives in the background and has not finished (§5.1): the job is
        # not completed until the provider says the episodes are processed.
        out["status"] = "pending"
        out["x.memfed"] = {"delivered": True, "derivation": "pending"}
    for record_id in record_ids:
        try:
            record = await on_provider(call.services, node, read(record_id), read=True)
        except ApiError as error:
            # The job's state is the gateway's, so it is answered even while the provider is away.
            if error.code == "memory_record_not_found":
                out["degraded"] = [entries.entry("records", "erased_since")]
                continue
            out["records"] = None
            out["degraded"] = [entries.entry("records", error.code)]
            break
        out["records"].append(record_json(record, shown, node.id))
    return out


async def _still_deriving(services: Services, node: MemoryNode, record_ids: Sequence[str]) -> bool:
    provider = handle_for(services, node).provider
    if not record_ids or not isinstance(provider, DerivingProvider):
        return False

    async def ask(p: Provider) -> bool:
        return await cast(DerivingProvider, p).derivation_pending(node.id, record_ids)

    try:
        return await on_provider(services, node, ask, read=True)
    except ApiError:
        return True  # not known to be done: not reported done


M = "/v1/memories/{memory_id}"
ENDPOINTS = [
    Endpoint("GET", M + "/prime", prime, "The memory's standing records as fenced instructions, within a "
             "token budget.", "memories.prime", query=PrimeQuery, response=PrimeOut, tags=("agent",)),
    Endpoint("POST", M + "/observe", observe, "observe: append episodes; the provider decides what to derive.",
             "memories.observe", body=Observe, status=201, also=(202,), write=True,
             response=ObservationOut, tags=("agent",)),
    Endpoint("GET", M + "/jobs/{job_id}", get_job, "What an observe that answered 202 has written since.",
             "memories.job", response=JobOut, tags=("agent",)),
]
