"""The official SDK (zep-cloud 4.0.1) as a wire oracle for the v4 adapter.

Every request the adapter sends in a run of its operations (graphs, episodes, facts, entities, closing
marks, lists, searches with filters, the subgraph, deletes, task polls) is sent again through the SDK
method for that operation, given the same arguments; both are captured at an `httpx.MockTransport`,
and must agree on method, path, query, JSON body and the auth and idempotency headers. A field the
adapter spells in a way the SDK does not know, or puts in the wrong place, makes them differ.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from adapters.base import Condition, Part, RecallQuery, Reference
from tests.adapters.fake_zep import FakeZep, zep_provider
from tests.adapters.harnesses import M1, PERSON, Stamps

zep_cloud = pytest.importorskip("zep_cloud")
from zep_cloud.client import AsyncZep  # noqa: E402
from zep_cloud.types import (  # noqa: E402
    EdgeInput,
    EdgeListFilters,
    EdgeSearchFilters,
    EpisodeListFilters,
    EpisodeSearchFilters,
    NodeInput,
    NodeListFilters,
)

Sdk = Callable[[AsyncZep], Awaitable[Any]]


def _pruned(value: Any) -> Any:
    """JSON with null members left out: the SDK omits an unset field where the adapter may send null."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def shape(request: httpx.Request) -> dict[str, Any]:
    body = json.loads(request.content) if request.content else None
    return {
        "method": request.method, "path": request.url.path,
        "query": [list(kv) for kv in sorted(request.url.params.multi_items())],
        "body": _pruned(body) or None, "auth": request.headers.get("authorization"),
        "idempotency": request.headers.get("idempotency-key"),
    }


async def through_sdk(call: Sdk, fake: FakeZep) -> httpx.Request:
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        sdk = AsyncZep(api_key=fake.api_key, base_url=f"{fake.base_url}/api/v4", httpx_client=client)
        # Only what was sent matters; `{}` may not parse as the answer.
        with contextlib.suppress(Exception):
            result = call(sdk)
            if hasattr(result, "__aiter__"):
                async for _ in result:
                    break
            else:
                await result
    assert len(seen) == 1, f"the SDK sent {len(seen)} requests"
    return seen[0]


def strict(model: Any, data: Any) -> Any:
    """The SDK's model of `data`, refusing any key the model does not define (its models pass unknown
    keys through, which would make a misspelled field compare equal)."""
    made = model.model_validate(data)

    def check(value: Any, where: str) -> None:
        if isinstance(value, pydantic.BaseModel):
            assert not value.model_extra, f"{where}: the SDK has no field {sorted(value.model_extra)}"
            for name in type(value).model_fields:
                check(getattr(value, name), f"{where}.{name}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                check(item, f"{where}[{i}]")

    check(made, model.__name__)
    return made


def sdk_call(request: httpx.Request) -> Sdk:
    """The SDK method (and its arguments) for one request the adapter sent."""
    p = [s for s in request.url.path.removeprefix("/api/v4/").split("/") if s]
    body = json.loads(request.content) if request.content else {}
    q = dict(request.url.params)
    key = request.headers.get("idempotency-key")
    size = int(q["page_size"]) if "page_size" in q else None
    m = request.method
    if p == ["graphs"]:
        return lambda z: z.graph.create(name=body["name"], description=body["description"], idempotency_key=key)
    if p == ["graphs", "list"]:
        return lambda z: z.graph.list(page_size=size, search=body["search"])
    if p[0] == "tasks":
        return lambda z: z.task.get(p[1])
    g = p[1]
    rest = p[2:]
    if not rest and m == "DELETE":
        return lambda z: z.graph.delete(g, idempotency_key=key)
    if rest == ["episodes"]:
        return lambda z: z.graph.episode.add(g, **body, idempotency_key=key)
    if rest == ["edges"]:
        edges = [strict(EdgeInput, e) for e in body["edges"]]
        return lambda z: z.graph.edge.add(g, edges=edges, deduplicate=body["deduplicate"], idempotency_key=key)
    if rest == ["nodes"]:
        nodes = [strict(NodeInput, n) for n in body["nodes"]]
        return lambda z: z.graph.node.add(g, nodes=nodes, idempotency_key=key)
    if rest == ["subgraph"]:
        return lambda z: z.graph.get_subgraph(g, seed_node_uuids=body["seed_node_uuids"], depth=body["depth"])
    if rest[0] == "search":
        kind = rest[1]
        model = {"edges": EdgeSearchFilters, "episodes": EpisodeSearchFilters}.get(kind)
        filters = strict(model, body["filters"]) if "filters" in body and model else None
        method = {"edges": "search_edges", "nodes": "search_nodes", "episodes": "search_episodes"}[kind]
        extra = {"filters": filters} if filters is not None else {}
        return lambda z: getattr(z.graph, method)(g, query=body["query"], reranker=body["reranker"],
                                                  page_size=size, **extra)
    client_of = {"edges": "edge", "nodes": "node", "episodes": "episode"}[rest[0]]
    if rest[1:] == ["list"]:
        listed = {"edges": EdgeListFilters, "nodes": NodeListFilters, "episodes": EpisodeListFilters}[rest[0]]
        given = {"filters": strict(listed, body["filters"])} if "filters" in body else {}
        return lambda z: getattr(z.graph, client_of).list(g, page_size=size, cursor=q.get("cursor"), **given)
    if m == "DELETE":
        return lambda z: getattr(z.graph, client_of).delete(g, rest[1], idempotency_key=key)
    if m == "PATCH":
        return lambda z: getattr(z.graph, client_of).update(g, rest[1], **body, idempotency_key=key)
    if m == "GET":
        return lambda z: getattr(z.graph, client_of).get(g, rest[1])
    raise AssertionError(f"no SDK method known for {m} {request.url.path}")


async def test_every_request_the_v4_adapter_sends_is_the_one_the_sdk_sends() -> None:
    fake = FakeZep("v4", task_polls=2)
    stamps = Stamps()
    async with zep_provider("v4", fake, filter_attributes=("account",)) as zep:
        ada = await zep.remember(M1, stamps.record("Ada Lovelace.", type="entity", title="Ada"))
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact", references=(
            Reference(M1, ada.id, "subject"),), valid_from=stamps.tick(), write_id="hwr_" + "b" * 32))
        note = await zep.remember(M1, stamps.record("Met Ada at the fair.", type="note"))
        await zep.revise(M1, fact.id, stamps.revision(content=(Part("text", "Ada works at Globex."),)))
        await zep.revise(M1, note.id, stamps.revision(title="The fair"))
        await zep.revise(M1, ada.id, stamps.revision(title="Ada L."))
        await zep.forget(M1, note.id, PERSON, stamps.tick())
        await zep.recall([M1], RecallQuery(query="Ada works", types=("note",)))
        await zep.recall([M1], RecallQuery(query="Ada works"))
        await zep.recall([M1], RecallQuery(filters=(Condition("type", "in", ["note", "procedure"]),)))
        await zep.remember(M1, stamps.record("Acme renews.", type="note", attributes={"account": "acme"}))
        # sent to Zep: the attribute as metadata_filters groups, then the candidates' chains by record id
        await zep.recall([M1], RecallQuery(filters=(Condition("type", "in", ["note"]),
                                                    Condition("attributes.account", "in", ["acme", "x"]))))
        # searched as well: the same narrowed listing, then the chains of the candidates and of the hits
        await zep.recall([M1], RecallQuery(query="Acme renews", types=("note",), filters=(
            Condition("attributes.account", "eq", "acme"),)))
        await zep.recall([M1], RecallQuery(query="Ada works", filters=(
            Condition("time.valid_from", "gte", stamps.tick().isoformat()),)))
        # the edge listing with date_filters on valid_at, then the facts' chains by property_filters
        await zep.recall([M1], RecallQuery(filters=(Condition("time.valid_from", "lte", stamps.tick().isoformat()),)))
        await zep.neighbourhood(M1, fact.id, 2)
        await zep.erase(M1, [fact.id])
        await zep.drop_memory(M1)

    operations = {(r.method, "/".join("{id}" if len(s) == 36 else s for s in r.url.path.split("/")))
                  for r in fake.requests}
    assert len(operations) >= 15, sorted(operations)
    pushed = [r.content.decode() for r in fake.requests if r.url.path.endswith("/episodes/list") and r.content]
    assert any("memfed_attr_account" in p for p in pushed) and any('"memfed_record"' in p for p in pushed)
    edges = [r.content.decode() for r in fake.requests if r.url.path.endswith("/edges/list") and r.content]
    assert any('"date_filters"' in e for e in edges) and any('"property_filters"' in e for e in edges)
    for request in fake.requests:
        theirs = await through_sdk(sdk_call(request), fake)
        mine, sdk = shape(request), shape(theirs)
        if mine["idempotency"] and not mine["idempotency"].startswith("memfed-read-"):  # a write's own key
            assert mine["idempotency"] == sdk["idempotency"], request.url.path
        assert {**mine, "idempotency": bool(mine["idempotency"])} == {**sdk, "idempotency": bool(
            sdk["idempotency"])}, f"{request.method} {request.url.path}"


async def test_the_oracle_tells_a_field_the_sdk_does_not_spell_that_way() -> None:
    """A node sent with `labels` (the SDK's NodeInput has `label`) does not compare equal."""
    fake = FakeZep("v4")
    graph = "0b7c9d7e-4a43-4b5e-8a4b-3f0c2d1e5a6b"
    wrong = httpx.Request("POST", f"{fake.base_url}/api/v4/graphs/{graph}/nodes", json={
        "nodes": [{"name": "Ada", "labels": ["Person"]}]}, headers={
        "Authorization": f"Api-Key {fake.api_key}", "Idempotency-Key": "k"})
    with pytest.raises(AssertionError, match="labels"):
        sdk_call(wrong)


# --------------------------------------------------------------------------- v3, through zep-cloud 3.x

ZEP3 = Path(sys.prefix) / "zep-cloud-3"  # scripts/check installs zep-cloud 3.30.0 here, --no-deps


def through_sdk3(requests: list[httpx.Request], fake: FakeZep) -> list[dict[str, Any]]:
    """What zep-cloud 3.x sends for the same operations, from a process of its own (tests/adapters/
    _zep3_oracle.py): 3.x and 4.x are one package name and cannot be imported side by side."""
    asked = {"base_url": f"{fake.base_url}/api/v2", "api_key": fake.api_key, "requests": [
        {"method": r.method, "path": r.url.path, "query": sorted(r.url.params.multi_items()),
         "body": json.loads(r.content) if r.content else None} for r in requests]}
    script = Path(__file__).with_name("_zep3_oracle.py")
    env = {**os.environ, "PYTHONPATH": f"{ZEP3}{os.pathsep}{Path(__file__).resolve().parents[2]}"}
    done = subprocess.run([sys.executable, str(script)], input=json.dumps(asked), capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    answered: list[dict[str, Any]] = json.loads(done.stdout)
    return answered


@pytest.mark.skipif(not (ZEP3 / "zep_cloud").is_dir(), reason="zep-cloud 3.x is installed by scripts/check")
async def test_every_request_the_v3_adapter_sends_is_the_one_zep_cloud_3_sends() -> None:
    fake = FakeZep("v3")
    stamps = Stamps()
    async with zep_provider("v3", fake) as zep:
        ada = await zep.remember(M1, stamps.record("Ada Lovelace.", type="entity", title="Ada"))
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact", references=(
            Reference(M1, ada.id, "subject"),), valid_from=stamps.tick()))
        note = await zep.remember(M1, stamps.record("Met Ada at the fair.", type="note"))
        await zep.revise(M1, fact.id, stamps.revision(content=(Part("text", "Ada works at Globex."),)))
        await zep.forget(M1, note.id, PERSON, stamps.tick())
        await zep.recall([M1], RecallQuery(query="Ada works", types=("note",)))
        await zep.recall([M1], RecallQuery(query="Ada works"))
        await zep.recall([M1], RecallQuery(filters=(Condition("type", "in", ["note", "procedure"]),)))
        await zep.neighbourhood(M1, fact.id, 2)
        await zep.erase(M1, [fact.id, ada.id])
        await zep.drop_memory(M1)

    operations = {(r.method, "/".join("{id}" if len(s) == 36 else s for s in r.url.path.split("/")))
                  for r in fake.requests}
    assert len(operations) >= 14, sorted(operations)
    theirs = through_sdk3(fake.requests, fake)
    for request, sdk in zip(fake.requests, theirs, strict=True):
        assert "error" not in sdk, sdk
        mine = shape(request)
        assert request.headers.get("idempotency-key") is None  # v3 takes none
        assert {k: mine[k] for k in ("method", "path", "query", "body", "auth")} == {
            **sdk, "body": _pruned(sdk["body"]) or None}, f"{request.method} {request.url.path}"


async def test_the_fakes_answers_are_what_the_sdk_reads() -> None:
    """The fake's v4 answers parse as the SDK's own models (graphs, edges, nodes, episodes, searches, tasks),
    and memfed's keys are where the SDK reads them: an edge's and a node's attributes, an episode's metadata."""
    fake = FakeZep("v4", task_polls=1)
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        ada = await zep.remember(M1, stamps.record("Ada.", type="entity", title="Ada"))
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact"))
        note = await zep.remember(M1, stamps.record("Met Ada at the fair.", type="note"))
    graph = next(iter(fake.graphs))
    async with httpx.AsyncClient(transport=httpx.MockTransport(fake.respond)) as client:
        sdk = AsyncZep(api_key=fake.api_key, base_url=f"{fake.base_url}/api/v4", httpx_client=client)
        graphs = [g async for g in await sdk.graph.list(page_size=10, search="memfed:")]
        edges = [e async for e in await sdk.graph.edge.list(graph, page_size=100)]
        nodes = [n async for n in await sdk.graph.node.list(graph, page_size=100)]
        episodes = [e async for e in await sdk.graph.episode.list(graph, page_size=100)]
        hits = (await sdk.graph.search_edges(graph, query="Ada works", page_size=10)).items
        deleted = await sdk.graph.edge.delete(graph, edges[0].uuid_)
        task = await sdk.task.get(deleted.task.uuid_)
    assert [g.uuid_ for g in graphs] == [graph]
    assert [e.attributes["memfed_record"] for e in edges if e.attributes] == [fact.id]
    assert {n.attributes.get("memfed_record") for n in nodes if n.attributes} == {ada.id}
    assert [e.metadata["memfed_record"] for e in episodes if e.metadata] == [note.id]
    assert hits and hits[0].uuid_ == edges[0].uuid_
    assert task.status == "succeeded"
