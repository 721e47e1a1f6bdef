"""The graph read (§6.6): records as nodes, references as edges, around one record or for a whole scope.

Built by the gateway from what every provider has (records and their references), so it is the same
for every provider. The scope is a search's scope; an edge may lead anywhere, and its target becomes a
node only when the reader may read it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from adapters import degraded as entries
from adapters.base import Page, Provider, Record
from gateway.api._calls import on_provider, with_alias
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Graph
from gateway.api.render import record_json
from gateway.errors import ApiError, record_not_found
from policies import access
from policies.recall import plan

SCAN_LIMIT = 10_000
Key = tuple[str, str]


async def _scope_records(call: Call, memory_ids: tuple[str, ...], degraded: list[str]) -> dict[Key, Record]:
    tree = call.services.store.tree
    found: dict[Key, Record] = {}
    for memory_id in memory_ids:
        node = tree.get(memory_id)
        if node is None:
            continue
        cursor: str | None = None
        while True:
            if len(found) >= SCAN_LIMIT:
                degraded.append(entries.entry("graph", f"scan_capped_at_{SCAN_LIMIT}_records"))
                return found
            try:
                page = await on_provider(call.services, node, _lister(memory_id, cursor), read=True)
            except ApiError as error:
                detail = error.detail if isinstance(error.detail, dict) else {}
                degraded.append(entries.provider_entry(node.provider, str(detail.get("reason", "unavailable"))))
                break
            for record in page.items:
                found[(memory_id, record.id)] = record
            cursor = page.next
            if not cursor:
                break
    return found


def _lister(memory_id: str, cursor: str | None) -> Callable[[Provider], Awaitable[Page]]:
    def ask(provider: Provider) -> Awaitable[Page]:
        return provider.list(memory_id, cursor=cursor, limit=200)

    return ask


async def _fetch_outside(call: Call, key: Key) -> Record | None:
    node = call.services.store.tree.get(key[0])
    if node is None:
        return None
    try:
        return await with_alias(call.services, node, key[1], lambda rid: lambda p: p.get(key[0], rid), read=True)
    except ApiError:
        return None


async def graph(call: Call) -> dict[str, Any]:
    body: Graph = call.body
    services = call.services
    tree = services.store.tree
    principals = call.principal.principals
    node = require(call, call.path["memory_id"], "read", "graph")
    scope = plan(tree, principals, node.id, cap=services.config.recall_cap)
    degraded = list(scope.degraded)
    records = await _scope_records(call, scope.memory_ids, degraded)

    def readable(memory_id: str) -> bool:
        return tree.exists(memory_id) and "read" in access.effective(tree, principals, memory_id)

    incoming: dict[Key, list[Key]] = {}
    for key, record in records.items():
        for ref in record.references:
            incoming.setdefault((ref.memory_id, ref.record_id), []).append(key)

    if body.around is None:
        distance = {key: 0 for key in sorted(records)}
    else:
        start = next((k for k in sorted(records) if k[1] == body.around), None)
        if start is None:
            raise record_not_found()
        distance = {start: 0}
        queue = deque([start])
        while queue:
            key = queue.popleft()
            if distance[key] >= body.hops:
                continue
            found = records.get(key)
            if found is None and readable(key[0]):
                found = await _fetch_outside(call, key)
                if found is not None:
                    records[key] = found
            neighbours = [(r.memory_id, r.record_id) for r in found.references] if found else []
            neighbours += incoming.get(key, [])
            for nxt in neighbours:
                if nxt not in distance and readable(nxt[0]):
                    distance[nxt] = distance[key] + 1
                    queue.append(nxt)
    for key in list(distance):
        if key not in records:
            fetched = await _fetch_outside(call, key)
            if fetched is None:
                del distance[key]
            else:
                records[key] = fetched
    wanted = set(body.types or ())
    ordered = sorted((k for k in distance if not wanted or records[k].type in wanted),
                     key=lambda k: (distance[k], k))
    truncated = len(ordered) > body.limit
    chosen = ordered[: body.limit]
    nodes = []
    edges = []
    for key in chosen:
        record = records[key]
        place = tree.get(key[0])
        nodes.append({"record": record_json(record, tree, principals, key[0]),
                      "memory": {"id": key[0], "name": place.name if place else None}})
        for ref in record.references:
            edge: dict[str, Any] = {"from": {"memory_id": key[0], "record_id": key[1]}}
            if readable(ref.memory_id):
                edge["to"] = {"memory_id": ref.memory_id, "record_id": ref.record_id}
                if ref.rel is not None:
                    edge["rel"] = ref.rel
                edge["available"] = True
            else:
                call.audit("graph.reference", ref.memory_id, "read", False, "reference target not readable")
                edge["to"] = {"record_id": ref.record_id}
                edge["available"] = False
            edges.append(edge)
    if truncated:
        degraded.append(entries.entry("graph", f"truncated_at_{body.limit}_nodes"))
    return {"object": "memory.graph", "nodes": nodes, "edges": edges, "truncated": truncated,
            "degraded": list(dict.fromkeys(degraded))}


ENDPOINTS = [
    Endpoint("POST", "/v1/memories/{memory_id}/graph", graph,
             "graph: records as nodes and references as edges.", "graph", body=Graph, tags=("recall",)),
]
