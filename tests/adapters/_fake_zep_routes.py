"""The routes of the fake Zep (tests/adapters/fake_zep.py): one function per documented endpoint of each
variant, over the fake's store. Paths are relative to the variant's prefix (`/api/v4`, `/api/v2`)."""

from __future__ import annotations

import re
import uuid as uuidlib
from datetime import datetime
from typing import Any

METADATA_KEYS = 10
TEMPORAL = ("valid_at", "invalid_at", "expired_at")
Answer = tuple[int, Any, dict[str, str]]


class Refusal(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _uuid() -> str:
    return str(uuidlib.uuid4())


def _is_uuid(value: str) -> bool:
    try:
        return str(uuidlib.UUID(value)) == value
    except ValueError:
        return False


def _meta(raw: Any) -> dict[str, Any]:
    meta = dict(raw or {})
    if len(meta) > METADATA_KEYS:
        raise Refusal(400, "invalid_metadata", f"metadata holds at most {METADATA_KEYS} keys")
    return meta


def route(fake: Any, method: str, path: str, params: dict[str, str], body: Any) -> Answer:
    parts = [p for p in path.split("/") if p]
    if fake.variant == "v4":
        return _v4(fake, method, parts, params, body or {})
    return _v3(fake, method, parts, params, body or {})


# --------------------------------------------------------------------------- v4


def _graph_v4(fake: Any, ref: str) -> str:
    if not _is_uuid(ref):
        raise Refusal(400, "invalid_identifier", "graphs are addressed by their uuid in v4")
    if ref not in fake.graphs:
        raise Refusal(404, "not_found", "graph not found")
    return ref


def _task(fake: Any, apply: Any) -> dict[str, Any]:
    task = {"uuid": _uuid(), "status": "pending", "type": "delete", "polls": 0, "apply": apply}
    fake.tasks[task["uuid"]] = task
    return {"task": _task_view(task)}


def _task_view(task: dict[str, Any]) -> dict[str, Any]:
    view = {k: task[k] for k in ("uuid", "status", "type")}
    if task["status"] in ("failed", "partial"):
        view["error"] = {"code": "task_failed", "message": "the task did not complete"}
    return view


def _page(items: list[dict[str, Any]], params: dict[str, str]) -> dict[str, Any]:
    size = int(params.get("page_size", 50))
    start = int(params.get("cursor") or 0)
    chunk = items[start:start + size]
    return {"items": chunk, "next_cursor": str(start + size) if start + size < len(items) else None}


def _v4(fake: Any, method: str, p: list[str], params: dict[str, str], body: Any) -> Answer:
    if p == ["graphs"] and method == "POST":
        graph = {"uuid": _uuid(), "name": body.get("name"), "description": body.get("description"),
                 "created_at": "2026-12-01T00:00:00Z"}
        fake.graphs[graph["uuid"]] = graph
        return 201, graph, {}
    if p == ["graphs", "list"] and method == "POST":
        search = body.get("search") or ""
        return 200, _page([g for g in fake.graphs.values() if search in (g["name"] or "")], params), {}
    if p[:1] == ["tasks"] and len(p) == 2 and method == "GET":
        task = fake.tasks.get(p[1])
        if task is None:
            raise Refusal(404, "not_found", "task not found")
        task["polls"] += 1
        if task["type"] == "ingest" and task["status"] not in ("failed", "partial"):  # ends when processed
            done = fake.episodes.get(task["episode"], {}).get("processed", True)
            task["status"] = "succeeded" if done else "processing"
        elif task["status"] == "pending" and task["polls"] >= fake.task_polls:
            task["status"] = fake.task_outcome
            if task["status"] == "succeeded":
                task["apply"]()
        return 200, _task_view(task), {}
    if p[:1] != ["graphs"] or len(p) < 2:
        raise Refusal(404, "not_found", "no such route")
    g = _graph_v4(fake, p[1])
    rest = p[2:]
    if not rest and method == "DELETE":
        return 202, _task(fake, lambda: fake._drop_graph(g)), {}
    if not rest and method == "GET":
        return 200, fake.graphs[g], {}
    kind = rest[0]
    if rest == ["episodes"] and method == "POST":
        episode = fake._episode(g, body["data"], body.get("type", "text"), _meta(body.get("metadata")),
                                body.get("source_description", ""), body.get("reference_time"))
        task = {"uuid": _uuid(), "status": "pending", "type": "ingest", "polls": 0, "episode": episode["uuid"],
                "apply": lambda: None}
        fake.tasks[task["uuid"]] = task
        return 202, {"episode": episode, "task": _task_view(task)}, {}
    if rest == ["edges"] and method == "POST":
        made = [_add_edge(fake, g, e) for e in body.get("edges") or []]
        return 201, {"edges": made}, {}
    if rest == ["nodes"] and method == "POST":
        made = []
        for n in body.get("nodes") or []:
            node = fake._node_named(g, n["name"], [n.get("label") or "Entity"])
            if node["metadata"] or node["summary"] or node["attributes"]:  # a stated node is never merged
                node = dict(node, uuid=_uuid())
                fake.nodes[node["uuid"]] = node
            node.update(summary=n.get("summary", ""), attributes=dict(n.get("attributes") or {}),
                        metadata=_meta(n.get("metadata")))
            made.append(node)
        return 201, {"nodes": made}, {}
    if kind == "search" and len(rest) == 2 and method == "POST":
        found = _search(fake, g, rest[1], body, int(params.get("page_size", 10)))
        return 200, {"items": [_v4_shape(i) for i in found], "next_cursor": None}, {}
    if rest == ["subgraph"] and method == "POST":
        sub = _subgraph(fake, g, body.get("seed_node_uuids") or [], int(body.get("depth", 1)))
        return 200, {k: [_v4_shape(i) for i in v] for k, v in sub.items()}, {}
    store = {"edges": fake.edges, "nodes": fake.nodes, "episodes": fake.episodes}.get(kind)
    if store is None:
        raise Refusal(404, "not_found", "no such route")
    if rest[1:] == ["list"] and method == "POST":
        wanted = _list_filters(kind, (body or {}).get("filters"))
        return 200, _page([_v4_shape(o) for o in store.values() if o["graph_uuid"] == g and wanted(o)], params), {}
    if len(rest) == 2:
        item = store.get(rest[1])
        if item is None or item["graph_uuid"] != g:
            raise Refusal(404, "not_found", f"{kind[:-1]} not found")
        if method == "GET":
            return 200, _v4_shape(item), {}
        if method == "DELETE":
            return 202, _task(fake, lambda: store.pop(rest[1], None)), {}
        if method == "PATCH":
            if kind == "edges" and any(k in body for k in TEMPORAL):
                raise Refusal(400, "invalid_request", "temporal fields are set at creation only")
            if kind == "episodes" and set(body) - {"metadata"}:
                raise Refusal(400, "invalid_request", "an episode's metadata alone can be changed")
            if "metadata" in body:
                item["metadata"] = _meta(body["metadata"])
            for key in ("fact", "attributes", "name", "summary"):
                if key in body:
                    item[key] = body[key]
            return 200, _v4_shape(item), {}
    raise Refusal(404, "not_found", "no such route")


def _v4_shape(item: dict[str, Any]) -> dict[str, Any]:
    """v4 reads an edge or a node back without metadata (zep-cloud 4.x `Edge`, `Node`); episodes keep it."""
    return item if "content" in item else {k: v for k, v in item.items() if k != "metadata"}


def _add_edge(fake: Any, g: str, e: dict[str, Any]) -> dict[str, Any]:
    ends = []
    for side in ("source_node", "target_node"):
        spec = e.get(side) or {}
        if spec.get("uuid"):
            node = fake.nodes.get(spec["uuid"])
            if node is None or node["graph_uuid"] != g:
                raise Refusal(400, "invalid_request", f"{side} names no node of this graph")
        else:
            node = fake._node_named(g, spec.get("name") or "", list(spec.get("labels") or ["Entity"]))
        ends.append(node)
    edge = fake._edge(g, fact=e["fact"], name=e.get("fact_name", "RELATES_TO"), source=ends[0], target=ends[1],
                      metadata=_meta(e.get("metadata")), attributes=dict(e.get("attributes") or {}),
                      valid_at=e.get("valid_at"), invalid_at=e.get("invalid_at"), expired_at=e.get("expired_at"))
    triple = fake._episode(g, e["fact"], "fact_triple", {}, "", None)
    edge["episode_uuids"] = [triple["uuid"]]
    return edge


# --------------------------------------------------------------------------- search and subgraph


# What each v4 listing accepts under `filters` (the SDK's EdgeListFilters, NodeListFilters and
# EpisodeListFilters); an unknown field is 400 unsupported_filter. The fake judges `metadata_filters` (an
# episode's metadata), `date_filters` (an OR of ANDs over the edge's own times), `property_filters` (ANDed,
# over an edge's or node's attributes), `edge_types` and `node_labels` (a node's); any other field it
# does not judge is refused as unsupported rather than silently ignored.
_LIST_FILTERS = {"episodes": {"metadata_filters", "mentioned_node_uuids", "content_policy_violated"},
                 "edges": {"metadata_filters", "date_filters", "edge_types", "property_filters", "node_labels"},
                 "nodes": {"metadata_filters", "date_filters", "property_filters", "node_labels"}}
_JUDGED = {"episodes": {"metadata_filters"}, "edges": {"date_filters", "edge_types", "property_filters"},
           "nodes": {"property_filters", "node_labels"}}


def _list_filters(kind: str, filters: Any) -> Any:
    if not filters:
        return lambda _: True
    if not isinstance(filters, dict):
        raise Refusal(400, "invalid_request", "filters must be an object")
    if set(filters) - _LIST_FILTERS[kind] or set(filters) - _JUDGED[kind]:
        raise Refusal(400, "unsupported_filter", f"unsupported filter: {', '.join(sorted(set(filters)))}")

    def admitted(item: dict[str, Any]) -> bool:
        if "metadata_filters" in filters and not _metadata_ok(item.get("metadata") or {}, filters["metadata_filters"]):
            return False
        if "date_filters" in filters and not _dates_ok(item, filters["date_filters"]):
            return False
        if any(not _meta_one(item.get("attributes") or {}, f) for f in filters.get("property_filters") or []):
            return False
        if "edge_types" in filters and item.get("name") not in filters["edge_types"]:
            return False
        return "node_labels" not in filters or bool(set(filters["node_labels"]) & set(item.get("labels") or []))

    return admitted


def _dates_ok(item: dict[str, Any], dates: Any) -> bool:
    groups = (dates or {}).get("any_of") or []
    return not groups or any(all(_date_ok(item, c["field"], c["operator"], c.get("value")) for c in group["all_of"])
                             for group in groups)


def _metadata_ok(meta: dict[str, Any], group: dict[str, Any]) -> bool:
    """Zep's metadata filter group: `type` and|or over its `filters` and nested `groups`; a filter is
    {property_name, operator, value} (eq ne gt lt gte lte in contains is_null is_not_null); a missing key
    matches only is_null."""
    if group.get("type", "and") not in ("and", "or"):
        raise Refusal(400, "invalid_request", "metadata filter group type must be and or or")
    results = [_meta_one(meta, f) for f in group.get("filters") or []]
    results += [_metadata_ok(meta, g) for g in group.get("groups") or []]
    return any(results) if group.get("type") == "or" else all(results)


def _meta_one(meta: dict[str, Any], f: dict[str, Any]) -> bool:
    op, value = f.get("operator"), f.get("value")
    name = f.get("property_name")
    have = meta.get(name) if isinstance(name, str) else None  # metadata is keyed by strings only
    if op == "is_null":
        return have is None
    if op == "is_not_null":
        return have is not None
    if op == "in":
        if not isinstance(value, list):
            raise Refusal(400, "invalid_request", "in takes an array")
        return have is not None and have in value
    if op == "contains":
        return isinstance(have, str) and isinstance(value, str) and value in have
    if op not in ("eq", "ne", "gt", "lt", "gte", "lte"):
        raise Refusal(400, "invalid_request", f"unknown metadata operator {op!r}")
    if have is None:
        return op == "ne"
    try:
        return bool({"eq": lambda: have == value, "ne": lambda: have != value, "gt": lambda: have > value,
                     "lt": lambda: have < value, "gte": lambda: have >= value, "lte": lambda: have <= value}[op]())
    except TypeError:
        return False


def _instant(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise Refusal(400, "invalid_request", f"not an RFC 3339 timestamp: {value!r}") from exc


def _date_ok(item: dict[str, Any], field: str, op: str, value: Any) -> bool:
    """A temporal field compared as an instant (Zep compares timestamps, not their spelling)."""
    have = item.get(field)
    if op in ("is_null", "IS NULL"):
        return have is None
    if op in ("is_not_null", "IS NOT NULL"):
        return have is not None
    if have is None:
        return False
    at, want = _instant(have), _instant(value)
    op = {"=": "eq", "<>": "ne", ">": "gt", "<": "lt", ">=": "gte", "<=": "lte"}.get(op, op)
    return {"eq": at == want, "ne": at != want, "gt": at > want, "lt": at < want,
            "gte": at >= want, "lte": at <= want}.get(op, False)


def _search(fake: Any, g: str, scope: str, body: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    store = {"edges": fake.edges, "nodes": fake.nodes, "episodes": fake.episodes}[scope]
    text_of = {"edges": lambda o: o["fact"], "nodes": lambda o: f"{o['name']} {o['summary']}",
               "episodes": lambda o: o["content"]}[scope]
    filters = body.get("filters") or {}
    v3 = body.get("search_filters") or {}
    scored = []
    for item in store.values():
        if item["graph_uuid"] != g:
            continue
        if scope == "edges":
            if not _dates_ok(item, filters.get("date_filters")):
                continue
            if any(v3.get(f) and not any(all(_date_ok(item, f, c["comparison_operator"], c.get("date"))
                                              for c in ands) for ands in v3[f])
                   for f in ("invalid_at", "expired_at")):
                continue
        if (meta := filters.get("metadata_filters")) and not _metadata_ok(item.get("metadata") or {}, meta):
            continue
        meta3 = v3.get("episode_metadata_filters")
        if meta3 and not all(item.get("metadata", {}).get(f["property_name"]) == f.get("property_value")
                             and f.get("comparison_operator") == "=" for f in meta3["filters"]):
            continue
        labels = filters.get("node_labels") or v3.get("node_labels")
        if scope == "nodes" and labels and not set(labels) & set(item["labels"]):
            continue
        score = fake.score(text_of(item), body.get("query") or "")
        if score > 0:
            scored.append((score, item))
    scored.sort(key=lambda pair: -pair[0])
    return [dict(item, score=score) for score, item in scored[:limit]]


def _subgraph(fake: Any, g: str, seeds: list[str], depth: int) -> dict[str, Any]:
    reached = {s for s in seeds if s in fake.nodes}
    edges: dict[str, dict[str, Any]] = {}
    frontier = set(reached)
    for _ in range(depth):
        nxt = set()
        for edge in fake.edges.values():
            if edge["graph_uuid"] != g:
                continue
            ends = {edge["source_node_uuid"], edge["target_node_uuid"]}
            if ends & frontier:
                edges[edge["uuid"]] = edge
                nxt |= ends - reached
        reached |= nxt
        frontier = nxt
    return {"nodes": [fake.nodes[n] for n in reached], "edges": list(edges.values())}


# --------------------------------------------------------------------------- v3 (under /api/v2)


_GRAPH_ID = re.compile(r"[A-Za-z0-9_.:\-]+")


def _graph_v3(fake: Any, graph_id: str) -> str:
    if graph_id not in fake.graphs:
        raise Refusal(404, "not_found", "graph not found")
    return graph_id


def _v3(fake: Any, method: str, p: list[str], params: dict[str, str], body: Any) -> Answer:
    if p == ["graph", "create"] and method == "POST":
        graph_id = body.get("graph_id") or ""
        if not _GRAPH_ID.fullmatch(graph_id):
            raise Refusal(400, "bad_request", "graph_id may hold letters, digits and _ . : - only")
        if graph_id in fake.graphs:
            raise Refusal(400, "bad_request", "graph already exists")
        fake.graphs[graph_id] = {"graph_id": graph_id, "uuid": _uuid(), "name": body.get("name")}
        return 201, fake.graphs[graph_id], {}
    if p == ["graph"] and method == "POST":
        g = _graph_v3(fake, body.get("graph_id") or "")
        episode = fake._episode(g, body["data"], body.get("type", "text"), _meta(body.get("metadata")),
                                body.get("source_description", ""), body.get("created_at"))
        return 202, episode, {}
    if p == ["graph", "add-fact-triple"] and method == "POST":
        g = _graph_v3(fake, body.get("graph_id") or "")
        edge = _add_edge(fake, g, {
            "fact": body["fact"], "fact_name": body.get("fact_name"), "attributes": body.get("edge_attributes"),
            "source_node": {"uuid": body.get("source_node_uuid"), "name": body.get("source_node_name")},
            "target_node": {"uuid": body.get("target_node_uuid"), "name": body.get("target_node_name")},
            **{k: body.get(k) for k in TEMPORAL}})
        return 200, {"edge": _v3_shape(edge), "source_node": fake.nodes[edge["source_node_uuid"]],
                     "target_node": fake.nodes[edge["target_node_uuid"]]}, {}
    if p == ["graph", "nodes"] and method == "POST":
        g = _graph_v3(fake, body.get("graph_id") or "")
        made = []
        for n in body.get("nodes") or []:
            node = {"uuid": _uuid(), "graph_uuid": g, "name": n["name"], "labels": [n.get("label") or "Entity"],
                    "summary": n.get("summary", ""), "attributes": dict(n.get("attributes") or {}),
                    "metadata": {}, "episode_uuids": [], "episode_uuids_truncated": False,
                    "created_at": "2026-12-01T00:00:00Z"}
            fake.nodes[node["uuid"]] = node
            made.append(_v3_shape(node))
        return 201, {"nodes": made}, {}
    if p == ["graph", "search"] and method == "POST":
        g = _graph_v3(fake, body.get("graph_id") or "")
        limit = int(body.get("limit", 10))
        if limit > 50:
            raise Refusal(400, "bad_request", "limit is at most 50")
        scope = body.get("scope", "edges")
        return 200, {scope: [_v3_shape(i) for i in _search(fake, g, scope, body, limit)]}, {}
    if p == ["graph", "subgraph"] and method == "POST":
        g = _graph_v3(fake, body.get("graph_id") or "")
        found = _subgraph(fake, g, body.get("seed_node_uuids") or [], int(body.get("depth", 1)))
        return 200, {k: [_v3_shape(i) for i in v] for k, v in found.items()}, {}
    if len(p) == 4 and p[:1] == ["graph"] and p[2] == "graph" and p[1] in ("edge", "node") and method == "POST":
        g = _graph_v3(fake, p[3])
        store = fake.edges if p[1] == "edge" else fake.nodes
        items = sorted((o for o in store.values() if o["graph_uuid"] == g), key=lambda o: o["uuid"])
        after = body.get("uuid_cursor")
        if after:
            items = [o for o in items if o["uuid"] > after]
        chunk = items[: int(body.get("limit", 100))]
        headers = {"Zep-Next-Cursor": chunk[-1]["uuid"]} if len(items) > len(chunk) else {}
        return 200, [_v3_shape(o) for o in chunk], headers
    if p[:3] == ["graph", "episodes", "graph"] and len(p) == 4 and method == "GET":
        g = _graph_v3(fake, p[3])
        mine = [o for o in fake.episodes.values() if o["graph_uuid"] == g]
        return 200, {"episodes": mine[-int(params.get("lastn", 10)):][::-1]}, {}
    if p == ["graph", "list-all"] and method == "GET":
        number, size = int(params.get("pageNumber", 1)), int(params.get("pageSize", 10))
        listed = [g for g in fake.graphs.values() if params.get("search", "") in g["graph_id"]]
        chunk = listed[(number - 1) * size: number * size]
        return 200, {"graphs": chunk, "page_number": number, "page_size": size, "row_count": len(chunk),
                     "total_count": len(listed)}, {}
    if len(p) == 2 and p[0] == "graph" and method == "GET":
        return 200, fake.graphs[_graph_v3(fake, p[1])], {}
    if len(p) == 2 and p[0] == "graph" and method == "DELETE":
        fake._drop_graph(_graph_v3(fake, p[1]))
        return 200, {"message": "deleted"}, {}
    if len(p) == 3 and p[0] == "graph" and p[1] in ("edge", "node", "episodes"):
        store = {"edge": fake.edges, "node": fake.nodes, "episodes": fake.episodes}[p[1]]
        item = store.get(p[2])
        if item is None:
            raise Refusal(404, "not_found", "not found")
        if method == "GET":
            return 200, _v3_shape(item), {}
        if method == "DELETE":
            del store[p[2]]
            return 200, {"message": "deleted"}, {}
        if method == "PATCH" and p[1] == "edge":
            for key in (*TEMPORAL, "fact", "name", "attributes"):
                if key in body:
                    item[key] = body[key]
            return 200, _v3_shape(item), {}
    raise Refusal(404, "not_found", "no such route")


def _v3_shape(item: dict[str, Any]) -> dict[str, Any]:
    """v3 spells `episode_uuids` as `episodes` and has no metadata on edges and nodes (episodes keep it)."""
    dropped = ("episode_uuids",) if "content" in item else ("episode_uuids", "metadata", "episode_uuids_truncated")
    out = {k: v for k, v in item.items() if k not in dropped}
    if "episode_uuids" in item:
        out["episodes"] = item["episode_uuids"]
    if "episode_uuids_truncated" in item:
        out["episodes_truncated"] = item["episode_uuids_truncated"]
    return out
