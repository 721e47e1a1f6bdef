"""Zep API v3, spoken by zep-cloud 3.x under the path `/api/v2`: graphs by a caller-chosen `graph_id`,
synchronous deletes, edge and node lists paged by a `Zep-Next-Cursor` header, edges whose `valid_at`,
`invalid_at` and `expired_at` a PATCH can change, edges and nodes read back without metadata. Request
shapes as zep-cloud 3.30.0 sends them (tests/adapters/test_zep_sdk.py); wire facts: shared/vendors/zep.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.zep._http import Call
from adapters.zep._shapes import (
    SCOPE,
    Carrier,
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

PAGE = 100
EPISODES_LASTN = 10_000  # v3 lists a graph's episodes newest first, `lastn` of them, without a cursor
_OPS = {"eq": "=", "ne": "<>", "gt": ">", "lt": "<", "gte": ">=", "lte": "<=", "is_null": "IS NULL",
        "is_not_null": "IS NOT NULL"}


class V3:
    name = "v3"
    prefix = "/api/v2"
    idempotency_keys = False
    async_deletes = False
    temporal_patch = True

    def carrier(self, kind: Kind) -> Carrier:
        # A v3 episode keeps metadata; v3 edges and nodes read back without it (zep-cloud 3.x EntityEdge,
        # EntityNode), so memfed's keys ride in their attributes.
        return "metadata" if kind == "episode" else "attributes"

    # ------------------------------------------------------------------ graphs

    def create_graph(self, name: str, description: str, key: str) -> Call:
        return Call("POST", "/graph/create", json={"graph_id": name, "name": name, "description": description},
                    mutates=True)

    def list_graphs(self, search: str, cursor: str | None) -> Call:
        return Call("GET", "/graph/list-all", params={"pageNumber": int(cursor or 1), "pageSize": PAGE,
                                                      "search": search})

    def graphs_page(self, body: Any) -> tuple[list[Graph], str | None]:
        if not isinstance(body, Mapping) or not isinstance(body.get("graphs") or [], list):
            raise ValueError("no graphs array")
        graphs = [self.graph_from(g) for g in body.get("graphs") or []]
        page, total = int(body.get("page_number") or 1), int(body.get("total_count") or 0)
        return graphs, (str(page + 1) if graphs and page * PAGE < total else None)

    def graph_from(self, body: Any) -> Graph:
        if not isinstance(body, Mapping) or not isinstance(body.get("graph_id"), str):
            raise ValueError("a graph without a graph_id")
        return Graph(str(body["graph_id"]), str(body["graph_id"]))

    def get_graph(self, graph: Graph) -> Call:
        return Call("GET", f"/graph/{graph.ref}")

    def delete_graph(self, graph: Graph, key: str) -> Call:
        return Call("DELETE", f"/graph/{graph.ref}", mutates=True)

    # ------------------------------------------------------------------ writes

    def add_episode(self, graph: Graph, data: str, type_: str, reference_time: str, pack: Mapping[str, Any],
                    key: str) -> Call:
        body = {"graph_id": graph.ref, "type": type_, "data": data, "created_at": reference_time,
                "source_description": "memfed", "metadata": dict(pack)}
        return Call("POST", "/graph", json=body, mutates=True)

    def episode_written(self, body: Any) -> Written:
        return Written(normalized(body, "episode"))

    def add_edges(self, graph: Graph, edges: Sequence[NewEdge], key: str) -> Call:
        if len(edges) != 1:
            raise ValueError("v3 adds one fact triple per call")
        e = edges[0]
        body: dict[str, Any] = {"graph_id": graph.ref, "fact": e.fact, "fact_name": e.name,
                                "valid_at": iso(e.valid_at), "invalid_at": iso(e.invalid_at),
                                "expired_at": iso(e.expired_at), "edge_attributes": dict(e.pack)}
        for side, node in (("source", e.source), ("target", e.target)):
            if "uuid" in node:
                body[f"{side}_node_uuid"] = node["uuid"]
            body[f"{side}_node_name"] = node.get("name", "")
        return Call("POST", "/graph/add-fact-triple", json=body, mutates=True)

    def edges_written(self, body: Any) -> list[Written]:
        raw = body.get("edge") if isinstance(body, Mapping) else None
        return [Written(normalized(raw, "edge"))]

    def add_node(self, graph: Graph, name: str, label: str, summary: str, pack: Mapping[str, Any],
                 key: str) -> Call:
        body = {"graph_id": graph.ref, "nodes": [{"name": name, "label": label, "summary": summary,
                                                  "attributes": dict(pack)}]}
        return Call("POST", "/graph/nodes", json=body, mutates=True)

    def node_written(self, body: Any) -> Written:
        nodes = items_of(body, "node", "nodes")
        if len(nodes) != 1:
            raise ValueError(f"{len(nodes)} nodes written, expected one")
        return Written(nodes[0])

    def close(self, graph: Graph, kind: Kind, item: Mapping[str, Any], marker: Mapping[str, Any],
              invalid_at: str | None, key: str) -> Call | None:
        """v3 closes an edge natively (PATCH of invalid_at/expired_at); a node or an episode cannot be
        changed, so its closing is known from the version after it alone."""
        if kind != "edge":
            return None
        body: dict[str, Any] = {"expired_at": marker["memfed_closed_at"]}
        if invalid_at is not None:
            body["invalid_at"] = invalid_at
        return Call("PATCH", f"/graph/edge/{item['uuid']}", json=body, mutates=True)

    def delete(self, graph: Graph, kind: Kind, uuid: str, key: str) -> Call:
        path = {"edge": "/graph/edge/", "node": "/graph/node/", "episode": "/graph/episodes/"}[kind]
        return Call("DELETE", path + uuid, mutates=True)

    def task(self, uuid: str) -> Call:
        raise ValueError("v3 has no tasks")

    def task_from(self, body: Any) -> Task:
        raise ValueError("v3 has no tasks")

    # ------------------------------------------------------------------ reads

    def get_episode(self, graph: Graph, uuid: str) -> Call:
        return Call("GET", f"/graph/episodes/{uuid}")

    def list_page(self, graph: Graph, kind: Kind, cursor: str | None, filters: ListFilters = ListFilters()) -> Call:
        """v3's listings take no metadata filter: `filters` is judged by memfed on what comes back."""
        if kind == "episode":
            return Call("GET", f"/graph/episodes/graph/{graph.ref}", params={"lastn": EPISODES_LASTN})
        body: dict[str, Any] = {"limit": PAGE}
        if cursor:
            body["uuid_cursor"] = cursor
        path = "/graph/edge/graph/" if kind == "edge" else "/graph/node/graph/"
        return Call("POST", path + graph.ref, json=body)

    def page_from(self, body: Any, headers: Mapping[str, str], kind: Kind) -> tuple[list[dict[str, Any]], str | None]:
        if kind == "episode":
            return items_of(body, kind, "episodes"), None
        nxt = headers.get("zep-next-cursor")
        return items_of(body, kind), (nxt or None)

    def search(self, graph: Graph, kind: Kind, query: str, limit: int, filters: SearchFilters) -> Call:
        body: dict[str, Any] = {"graph_id": graph.ref, "query": query, "scope": SCOPE[kind], "reranker": "rrf",
                                "limit": min(limit, 50)}
        wanted: dict[str, Any] = {}
        if kind == "edge":
            for c in filters.date_all_of:
                cond: dict[str, Any] = {"comparison_operator": _OPS[c.operator]}
                if c.value is not None:
                    cond["date"] = iso(c.value)
                wanted.setdefault(c.field, [[]])[0].append(cond)
        if filters.node_labels and kind == "node":
            wanted["node_labels"] = list(filters.node_labels)
        if filters.metadata_eq and kind == "episode":
            # v3 spells a metadata condition as a property filter (`comparison_operator`, `property_value`).
            wanted["episode_metadata_filters"] = {"type": "and", "filters": [
                {"property_name": k, "comparison_operator": "=", "property_value": v}
                for k, v in filters.metadata_eq]}
        if wanted:
            body["search_filters"] = wanted
        return Call("POST", "/graph/search", json=body)

    def hits_from(self, body: Any, kind: Kind) -> list[dict[str, Any]]:
        return items_of(body, kind, SCOPE[kind])

    def subgraph(self, graph: Graph, seeds: Sequence[str], depth: int) -> Call:
        return Call("POST", "/graph/subgraph", json={"graph_id": graph.ref, "seed_node_uuids": list(seeds),
                                                     "depth": depth})

    def subgraph_from(self, body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return items_of(body, "node", "nodes"), items_of(body, "edge", "edges")
