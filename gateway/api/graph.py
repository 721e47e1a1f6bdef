"""The graph read (§6.6): records as nodes, references as edges, around one record or for a whole scope.

Around a record, a memory whose provider keeps a graph of its own (adapters/graph.py, Zep) gives the records
near it from that graph rather than from a listing of the whole memory.

Built by the gateway from what every provider has (records and their references), so it is the same
for every provider. The scope is a search's scope; an edge may lead anywhere, and its target becomes a
node only when the reader may read it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from adapters import degraded as entries
from adapters.base import Page, Provider, Record
from adapters.graph import GraphProvider
from gateway.api._calls import on_provider, with_alias
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Graph
from gateway.api.render import Reader, reader, record_json
from gateway.api.responses import GraphOut
from gateway.base.errors import ApiError, record_not_found
from gateway.state.tree import MemoryNode
from policies import access
from policies.recall import plan

SCAN_LIMIT = 10_000
Key = tuple[str, str]


async def _scope_records(call: Call, memory_ids: tuple[str, ...], degraded: list[str],
                         around: str | None = None, hops: int = 1) -> dict[Key, Record]:
    tree = call.services.store.tree
    found: dict[Key, Record] = {}
    for memory_id in memory_ids:
        node = tree.get(memory_id)
        if node is None:
            continue
        if around is not None and (near := await _native(call, node, around, hops, degraded)) is not None:
            found.update(((memory_id, r.id), r) for r in near)
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


async def _native(call: Call, node: MemoryNode, around: str, hops: int,
                  degraded: list[str]) -> Sequence[Record] | None:
    """The records around `around` from the provider's own graph (adapters/graph.py), or None where the
    provider keeps none or the record is not in this memory (the memory is then listed)."""
    handle = call.services.providers.get(node.provider)
    if handle is None or not isinstance(handle.provider, GraphProvider):
        return None

    def ask(p: Provider) -> Awaitable[Sequence[Record] | None]:
        return cast(GraphProvider, p).neighbourhood(node.id, around, hops)

    try:
        return await on_provider(call.services, node, ask, read=True)
    except ApiError as error:
        detail = error.detail if isinstance(error.detail, dict) else {}
        degraded.append(f"provider:{node.provider}:{detail.get('reason', 'unavailable')}")
        return []


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


async def _fetch_all_outside(call: Call, keys: Sequence[Key], records: dict[Key, Record]) -> None:
    """Fetch, all at once (each provider's handle bounds its own concurrency), the records of `keys` the
    scope's listing did not hold; a key whose record cannot be read is left out of `records`."""
    wanted = [key for key in dict.fromkeys(keys) if key not in records]
    fetched = await asyncio.gather(*(_fetch_outside(call, key) for key in wanted))
    records.update((key, found) for key, found in zip(wanted, fetched, strict=True) if found is not None)


class _Walk:
    """The records within `hops` references of a start, one hop at a time, each hop's records from outside
    the scope fetched in one batch. Only memories the reader may read are entered."""

    def __init__(self, call: Call, records: dict[Key, Record], readable: Callable[[str], bool]) -> None:
        self.call, self.records, self.readable = call, records, readable
        self.incoming: dict[Key, list[Key]] = {}
        for key, record in records.items():
            for ref in record.references:
                self.incoming.setdefault((ref.memory_id, ref.record_id), []).append(key)

    def _neighbours(self, key: Key) -> list[Key]:
        found = self.records.get(key)
        out = [(r.memory_id, r.record_id) for r in found.references] if found else []
        return out + self.incoming.get(key, [])

    async def run(self, start: Key, hops: int) -> dict[Key, int]:
        distance = {start: 0}
        frontier = [start]
        for step in range(1, hops + 1):
            await _fetch_all_outside(self.call, [k for k in frontier if self.readable(k[0])], self.records)
            reached = [n for key in frontier for n in self._neighbours(key)]
            frontier = []
            for nxt in reached:
                if nxt not in distance and self.readable(nxt[0]):
                    distance[nxt] = step
                    frontier.append(nxt)
            if not frontier:
                break
        return distance


def _edges(key: Key, record: Record, shown: Reader) -> list[dict[str, Any]]:
    """A node's references as edges; one to a memory the reader may not read names no memory and is
    audited as the denial it is (by `shown`)."""
    edges = []
    for ref in record.references:
        edge: dict[str, Any] = {"from": {"memory_id": key[0], "record_id": key[1]}}
        if shown.follows(ref.memory_id):
            edge["to"] = {"memory_id": ref.memory_id, "record_id": ref.record_id}
            if ref.rel is not None:
                edge["rel"] = ref.rel
            edge["available"] = True
        else:
            edge["to"] = {"record_id": ref.record_id}
            edge["available"] = False
        edges.append(edge)
    return edges


async def graph(call: Call) -> dict[str, Any]:
    body = call.body_as(Graph)
    services = call.services
    tree = services.store.tree
    principals = call.authenticated().principals
    node = require(call, call.path["memory_id"], "read", "graph")
    scope = plan(tree, principals, node.id, cap=services.config.recall_cap)
    degraded = list(scope.degraded)
    records = await _scope_records(call, scope.memory_ids, degraded, body.around, body.hops)

    def readable(memory_id: str) -> bool:  # where the walk may step: no audit (it shows nothing refused), no reason
        return tree.exists(memory_id) and access.may_read(tree, principals, memory_id)

    if body.around is None:
        distance = {key: 0 for key in sorted(records)}
    else:
        start = next((k for k in sorted(records) if k[1] == body.around), None)
        if start is None:
            raise record_not_found()
        distance = await _Walk(call, records, readable).run(start, body.hops)
    await _fetch_all_outside(call, list(distance), records)
    wanted = set(body.types or ())
    ordered = sorted((k for k in distance if k in records and (not wanted or records[k].type in wanted)),
                     key=lambda k: (distance[k], k))
    truncated = len(ordered) > body.limit
    nodes, edges = [], []
    shown = reader(call, "graph.reference")
    for key in ordered[: body.limit]:
        record, place = records[key], tree.get(key[0])
        nodes.append({"record": record_json(record, shown, key[0]),
                      "memory": {"id": key[0], "name": place.name if place else None}})
        edges.extend(_edges(key, record, shown))
    if truncated:
        degraded.append(entries.entry("graph", f"truncated_at_{body.limit}_nodes"))
    return {"object": "memory.graph", "nodes": nodes, "edges": edges, "truncated": truncated,
            "degraded": list(dict.fromkeys(degraded))}


ENDPOINTS = [
    Endpoint("POST", "/v1/memories/{memory_id}/graph", graph,
             "graph: records as nodes and references as edges.", "graph", body=Graph,
             response=GraphOut, tags=("recall",)),
]
