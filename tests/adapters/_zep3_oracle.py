"""Sends requests again through zep-cloud 3.x and prints what it sent: the v3 half of the SDK oracle.

zep-cloud 3.x and 4.x are both the package `zep_cloud`, so 3.x cannot be imported beside the 4.x dev
dependency: tests/adapters/test_zep_sdk.py runs this file in a process of its own with the 3.x package
(installed by scripts/check with `--no-deps` into `.venv/zep-cloud-3`) first on its path. Reads one JSON
list of requests `{method, path, query, body}` the adapter sent on stdin; prints one JSON list of the
requests the SDK sent for the same operations, in the same form, or `{"error": ...}` for the first one
it cannot express.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pydantic
from zep_cloud import AsyncZep
from zep_cloud.types import AddNodeItem, SearchFilters

Sdk = Callable[[Any], Awaitable[Any]]


def strict(model: Any, data: Any) -> Any:
    """The SDK's model of `data`; ValueError naming any key it does not define."""
    made = model.model_validate(data)

    def check(value: Any, where: str) -> None:
        if isinstance(value, pydantic.BaseModel):
            if value.model_extra:
                raise ValueError(f"{where}: the SDK has no field {sorted(value.model_extra)}")
            for name in type(value).model_fields:
                check(getattr(value, name), f"{where}.{name}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                check(item, f"{where}[{i}]")

    check(made, model.__name__)
    return made


def call_for(request: dict[str, Any]) -> Sdk:
    p = [s for s in request["path"].removeprefix("/api/v2/").split("/") if s]
    body = dict(request["body"] or {})
    q = dict(request["query"])
    m = request["method"]
    if p == ["graph", "list-all"]:
        return lambda z: z.graph.list_all(page_number=int(q["pageNumber"]), page_size=int(q["pageSize"]),
                                          search=q["search"])
    if p == ["graph", "create"]:
        return lambda z: z.graph.create(**body)
    if p == ["graph"]:
        return lambda z: z.graph.add(**body)
    if p == ["graph", "add-fact-triple"]:
        return lambda z: z.graph.add_fact_triple(**body)
    if p == ["graph", "nodes"]:
        nodes = [strict(AddNodeItem, n) for n in body["nodes"]]
        return lambda z: z.graph.add_nodes(graph_id=body["graph_id"], nodes=nodes)
    if p == ["graph", "search"]:
        if "search_filters" in body:
            body["search_filters"] = strict(SearchFilters, body["search_filters"])
        return lambda z: z.graph.search(**body)
    if p == ["graph", "subgraph"]:
        return lambda z: z.graph.get_subgraph(**body)
    if len(p) == 4 and p[2] == "graph":
        kind, graph_id = p[1], p[3]
        if kind == "episodes":
            return lambda z: z.graph.episode.get_by_graph_id(graph_id, lastn=int(q["lastn"]))
        client = {"edge": "edge", "node": "node"}[kind]
        return lambda z: getattr(z.graph, client).get_by_graph_id(graph_id, **body)
    if len(p) == 2 and p[0] == "graph":
        return (lambda z: z.graph.get(p[1])) if m == "GET" else (lambda z: z.graph.delete(p[1]))
    if len(p) == 3 and p[0] == "graph":
        client = {"edge": "edge", "node": "node", "episodes": "episode"}[p[1]]
        if m == "PATCH":
            return lambda z: getattr(z.graph, client).update(p[2], **body)
        if m == "DELETE":
            return lambda z: getattr(z.graph, client).delete(p[2])
        return lambda z: getattr(z.graph, client).get(p[2])
    raise ValueError(f"no zep-cloud 3.x method known for {m} {request['path']}")


async def sent(call: Sdk, base_url: str, api_key: str) -> dict[str, Any]:
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        sdk = AsyncZep(api_key=api_key, base_url=base_url, httpx_client=client)
        # Only what was sent matters; `{}` may not parse as the answer.
        with contextlib.suppress(Exception):
            await call(sdk)
    if len(seen) != 1:
        raise ValueError(f"the SDK sent {len(seen)} requests")
    r = seen[0]
    return {"method": r.method, "path": r.url.path, "query": sorted(r.url.params.multi_items()),
            "body": json.loads(r.content) if r.content else None, "auth": r.headers.get("authorization")}


async def main() -> None:
    asked = json.load(sys.stdin)
    out = []
    for request in asked["requests"]:
        try:
            out.append(await sent(call_for(request), asked["base_url"], asked["api_key"]))
        except (ValueError, TypeError, KeyError) as exc:
            out.append({"error": f"{request['method']} {request['path']}: {exc}"})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
