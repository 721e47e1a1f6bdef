"""recall (§6): search a memory and every readable memory below it, across providers, as one ranking."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable
from typing import TypeVar

from adapters import degraded as entries
from adapters.base import Condition, RecallQuery
from gateway.api._calls import record_counts
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Recall
from gateway.api.render import children_counts, reader, recall_rendered, recall_result_json
from gateway.api.responses import RecallOut
from gateway.base.answers import RenderedAnswer
from gateway.base.errors import invalid
from gateway.federation import fanout as federation
from gateway.federation.plans import KeptPlan

T = TypeVar("T")


def deadline_of(call: Call, body: Recall) -> float:
    """The loop time the whole recall fits in: the gateway's deadline, or the caller's shorter `timeout`."""
    allowed = call.services.config.recall_deadline
    if body.timeout is not None and body.timeout > allowed:
        raise invalid(f"timeout: at most {allowed:g} seconds (the gateway's recall deadline); a caller may "
                      "only shorten it.", param="timeout")
    return asyncio.get_running_loop().time() + (body.timeout or allowed)


def recall_query(call: Call, body: Recall) -> RecallQuery:
    config = call.services.config
    return RecallQuery(
        query=body.query, text=body.text,
        filters=tuple(Condition(c.field, c.op, c.value) for c in body.conditions()),
        types=tuple(body.types or ()), as_of=body.as_of, include=body.include,
        limit=min(body.limit or config.recall_default_limit, config.recall_max_limit),
    )


# A Server-Timing metric name is an HTTP token; a provider's configured name is made one.
_TOKEN = re.compile(r"[^A-Za-z0-9!#$%&'*+.^_`|~-]")


async def audit_plan(call: Call, kept: KeptPlan) -> None:
    """Log the decision on every memory the recall covered or skipped, with its reason, as the plan's
    coverage sets. Runs after the providers were asked: building a new plan's reasons overlaps their work."""
    services = call.services
    if not services.audit.enabled:
        return
    await asyncio.sleep(0)
    services.decide_plan(call, "recall.plan", kept.root_id, "read", kept.coverage())


async def _timed(call: Call, name: str, work: Awaitable[T]) -> T:
    started = time.perf_counter()
    try:
        return await work
    finally:
        call.timings[name] = (time.perf_counter() - started) * 1000


async def recall(call: Call) -> RenderedAnswer:
    body = call.body_as(Recall)
    services = call.services
    tree = services.store.tree
    principals = call.authenticated().principals
    node = require(call, call.path["memory_id"], "read", "recall")
    deadline = deadline_of(call, body)
    kept = services.plans.get(tree, principals, node.id, body.depth, services.config.recall_cap)
    covered, by_provider = kept.plan, kept.by_provider()
    # The search is the answer's critical path: its calls go out first.
    searching = asyncio.create_task(
        _timed(call, "providers", federation.recall(services.providers, by_provider, recall_query(call, body),
                                                     services.config.recall_scoring, deadline=deadline)))
    # The work on the children below (a thousand of them on a flat tree) waits until the search's calls
    # are on their way: done before, it held them back.
    await federation.sent()
    places = kept.places()
    # The places to go next: counts known are shown, the others are asked after the answer has left, so
    # the answer never waits for counting.
    counting = asyncio.create_task(record_counts(services, places.nodes, call, wait=False))
    try:
        # Decided before the providers were asked (the plan), logged while they answer; the request's
        # decisions reach the journal before the answer goes out, so a crash cannot leave it unaudited.
        await audit_plan(call, kept)
        answer = await searching
    finally:
        if not searching.done():
            searching.cancel()
        counts = await counting
    for name, ms in answer.timings.items():  # each provider's time, beside the total, in Server-Timing
        call.timings["provider." + _TOKEN.sub("_", name)] = ms
    shown = reader(call, "recall.reference")
    results = [recall_result_json(fed.hit.record, shown, fed.hit.record.memory_id, fed.score, fed.hit.why,
                                  fed.parts.as_json() if fed.parts else None) for fed in answer.hits]
    children = children_counts(places, counts)
    parent = places.parent
    pending = [*((entries.entry("children", "counts_pending"),) if None in children else ()),
               *((entries.entry("parent", "count_pending"),) if parent and counts.get(parent.id) is None else ())]
    return RenderedAnswer(recall_rendered(results, places, children, counts,
                                          list(covered.degraded) + list(answer.degraded) + pending, answer.abstain))


ENDPOINTS = [
    Endpoint("POST", "/v1/memories/{memory_id}/recall", recall,
             "recall: search this memory and every readable memory below it.", "recall", body=Recall,
             response=RecallOut, tags=("recall",)),
]
