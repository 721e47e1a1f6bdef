"""Zep API v4 (`/api/v4`, spoken by zep-cloud 4.x): graphs by Zep-generated UUID, asynchronous deletes
returning a task, cursor pages `{"items", "next_cursor"}`, temporal fields settable only at creation.
Wire facts and captured request bodies: shared/vendors/zep.md §0-§1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.zep._http import Call
from adapters.zep._shapes import (
    SCOPE,
    Carrier,
    DateCondition,
    Graph,
    Kind,
    ListFilters,
    NewEdge,
    SearchFilters,
    Task,
    Written,
    iso,
    items_of,
    normalized,
)

PAGE = 100  # objects asked per list page
_PATH: dict[Kind, str] = {"edge": "edges", "node": "nodes", "episode": "episodes"}


def task_of(body: Any) -> Task | None:
    raw = body.get("task") if isinstance(body, Mapping) else None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("uuid"), str):
        return None
    return Task(str(raw["uuid"]), str(raw.get("status", "pending")), _error(raw.get("error")))


def _error(raw: Any) -> str | None:
    if isinstance(raw, Mapping):
        return str(raw.get("message") or raw.get("code") or "failed")
    return str(raw) if raw else None


def _dates(all_of: Sequence[DateCondition]) -> dict[str, Any]:
    """ANDed date conditions in v4's shape (an OR of ANDs)."""
    return {"any_of": [{"all_of": [
        {"field": c.field, "operator": c.operator, **({"value": iso(c.value)} if c.value else {})}
        for c in all_of]}]}


class V4:
    name = "v4"
    prefix = "/api/v4"
    idempotency_keys = True
    async_deletes = True
    temporal_patch = False  # PATCH of an edge takes only fact and attributes

    def carrier(self, kind: Kind) -> Carrier:
        # v4 takes metadata on every create, but reads an edge or a node back without it (zep-cloud 4.x
        # `Edge` and `Node` have no metadata; only `Episode` does): memfed's keys ride in their attributes.
        return "metadata" if kind == "episode" else "attributes"

    # ------------------------------------------------------------------ graphs

    def create_graph(self, name: str, description: str, key: str) -> Call:
        return Call("POST", "/graphs", json={"name": name, "description": description},
                    idempotency=key, mutates=True)

    def list_graphs(self, search: str, cursor: str | None) -> Call:
        params: dict[str, Any] = {"page_size": PAGE}
        if cursor:
            params["cursor"] = cursor
        return Call("POST", "/graphs/list", params=params, json={"search": search})

    def graphs_page(self, body: Any) -> tuple[list[Graph], str | None]:
        if not isinstance(body, Mapping) or not isinstance(body.get("items"), list):
            raise ValueError("no items array")
        nxt = body.get("next_cursor")
        return [self.graph_from(g) for g in body["items"]], (str(nxt) if nxt else None)

    def graph_from(self, body: Any) -> Graph:
        if not isinstance(body, Mapping) or not isinstance(body.get("uuid"), str):
            raise ValueError("a graph without a uuid")
        return Graph(str(body["uuid"]), str(body.get("name", "")))

    def get_graph(self, graph: Graph) -> Call:
        return Call("GET", f"/graphs/{graph.ref}")

    def delete_graph(self, graph: Graph, key: str) -> Call:
        return Call("DELETE", f"/graphs/{graph.ref}", idempotency=key, mutates=True)

    # ------------------------------------------------------------------ writes

    def add_episode(self, graph: Graph, data: str, type_: str, reference_time: str, pack: Mapping[str, Any],
                    key: str) -> Call:
        body = {"data": data, "type": type_, "reference_time": reference_time, "source_description": "memfed",
                "metadata": dict(pack)}
        return Call("POST", f"/graphs/{graph.ref}/episodes", json=body, idempotency=key, mutates=True)

    def episode_written(self, body: Any) -> Written:
        raw = body.get("episode") if isinstance(body, Mapping) else None
        return Written(normalized(raw, "episode"), task_of(body))

    def add_edges(self, graph: Graph, edges: Sequence[NewEdge], key: str) -> Call:
        body = {"deduplicate": False, "edges": [{
            "fact": e.fact, "fact_name": e.name, "source_node": dict(e.source), "target_node": dict(e.target),
            "valid_at": iso(e.valid_at), "invalid_at": iso(e.invalid_at), "expired_at": iso(e.expired_at),
            "attributes": dict(e.pack)} for e in edges]}
        return Call("POST", f"/graphs/{graph.ref}/edges", json=body, idempotency=key, mutates=True)

    def edges_written(self, body: Any) -> list[Written]:
        task = task_of(body)
        return [Written(item, task) for item in items_of(body, "edge", "edges")]

    def add_node(self, graph: Graph, name: str, label: str, summary: str, pack: Mapping[str, Any],
                 key: str) -> Call:
        body = {"nodes": [{"name": name, "label": label, "summary": summary, "attributes": dict(pack)}]}
        return Call("POST", f"/graphs/{graph.ref}/nodes", json=body, idempotency=key, mutates=True)

    def node_written(self, body: Any) -> Written:
        nodes = items_of(body, "node", "nodes")
        if len(nodes) != 1:
            raise ValueError(f"{len(nodes)} nodes written, expected one")
        return Written(nodes[0], task_of(body))

    def close(self, graph: Graph, kind: Kind, item: Mapping[str, Any], marker: Mapping[str, Any],
              invalid_at: str | None, key: str) -> Call:
        """Mark a closed version where v4 lets one be changed: an edge's or node's attributes, an episode's
        metadata. Temporal fields cannot be patched in v4: the next version carries them instead."""
        ref = f"/graphs/{graph.ref}/{_PATH[kind]}/{item['uuid']}"
        if kind == "episode":
            return Call("PATCH", ref, json={"metadata": {**item.get("metadata", {}), **marker}},
                        idempotency=key, mutates=True)
        return Call("PATCH", ref, json={"attributes": {**item.get("attributes", {}), **marker}},
                    idempotency=key, mutates=True)

    def delete(self, graph: Graph, kind: Kind, uuid: str, key: str) -> Call:
        return Call("DELETE", f"/graphs/{graph.ref}/{_PATH[kind]}/{uuid}", idempotency=key, mutates=True)

    def task(self, uuid: str) -> Call:
        return Call("GET", f"/tasks/{uuid}")

    def task_from(self, body: Any) -> Task:
        if isinstance(body, Mapping) and isinstance(body.get("task"), Mapping):
            body = body["task"]
        if not isinstance(body, Mapping) or not isinstance(body.get("uuid"), str):
            raise ValueError("not a task")
        return Task(str(body["uuid"]), str(body.get("status", "pending")), _error(body.get("error")))

    # ------------------------------------------------------------------ reads

    def get_episode(self, graph: Graph, uuid: str) -> Call:
        return Call("GET", f"/graphs/{graph.ref}/episodes/{uuid}")

    def list_page(self, graph: Graph, kind: Kind, cursor: str | None, filters: ListFilters = ListFilters()) -> Call:
        params: dict[str, Any] = {"page_size": PAGE}
        if cursor:
            params["cursor"] = cursor
        body: dict[str, Any] = {}
        if kind == "episode" and (filters.episode_types or filters.metadata_groups):
            group: dict[str, Any] = {"type": "and", "filters": [
                {"property_name": "memfed_type", "operator": "in", "value": list(filters.episode_types)}
            ] if filters.episode_types else []}
            if filters.metadata_groups:
                group["groups"] = [dict(g) for g in filters.metadata_groups]
            body["filters"] = {"metadata_filters": group}
        if kind == "edge" and (filters.edge_dates or filters.edge_properties):
            wanted: dict[str, Any] = {}
            if filters.edge_dates:
                wanted["date_filters"] = _dates(filters.edge_dates)
            if filters.edge_properties:
                wanted["property_filters"] = [dict(f) for f in filters.edge_properties]
            body["filters"] = wanted
        return Call("POST", f"/graphs/{graph.ref}/{_PATH[kind]}/list", params=params, json=body)

    def page_from(self, body: Any, headers: Mapping[str, str], kind: Kind) -> tuple[list[dict[str, Any]], str | None]:
        nxt = body.get("next_cursor") if isinstance(body, Mapping) else None
        return items_of(body, kind), (str(nxt) if nxt else None)

    def search(self, graph: Graph, kind: Kind, query: str, limit: int, filters: SearchFilters) -> Call:
        wanted: dict[str, Any] = {}
        if filters.date_all_of and kind == "edge":
            wanted["date_filters"] = _dates(filters.date_all_of)
        if filters.metadata_eq:
            wanted["metadata_filters"] = {"type": "and", "filters": [
                {"property_name": k, "operator": "eq", "value": v} for k, v in filters.metadata_eq]}
        if filters.node_labels and kind == "node":
            wanted["node_labels"] = list(filters.node_labels)
        body: dict[str, Any] = {"query": query, "reranker": "rrf"}
        if wanted:
            body["filters"] = wanted
        return Call("POST", f"/graphs/{graph.ref}/search/{SCOPE[kind]}", params={"page_size": limit}, json=body)

    def hits_from(self, body: Any, kind: Kind) -> list[dict[str, Any]]:
        return items_of(body, kind)

    def subgraph(self, graph: Graph, seeds: Sequence[str], depth: int) -> Call:
        return Call("POST", f"/graphs/{graph.ref}/subgraph", json={"seed_node_uuids": list(seeds), "depth": depth})

    def subgraph_from(self, body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return items_of(body, "node", "nodes"), items_of(body, "edge", "edges")
