"""A stateful fake of Zep's HTTP API, v4 (`/api/v4`) and v3 (`/api/v2`), at the transport, after
shared/vendors/zep.md.

What the vendor does, the fake does:
- `Authorization: Api-Key <key>` or 401; v4 keeps the answer of each `Idempotency-Key` and answers a
  repeat with it (the write is not made twice); a v4 path naming a graph by anything but a UUID is 400
  `invalid_identifier`; v4 errors are `{"error": {code, message, param, details, request_id}}`.
- metadata with more than 10 keys is 400; a v4 `PATCH` of an edge naming a temporal field is 400 (they are
  set at creation only), v3's PATCH takes them.
- an episode is stored `processed: false` and processed in the background after `process_after` seconds
  (None: only when the test calls `process()`): a text episode yields a derived node and a derived edge
  naming it in `episode_uuids`. A fact added directly gets the `fact_triple` episode Zep keeps for it.
  Its ingestion task (`GET tasks/{uuid}`) is `processing` until then, `succeeded` after; with
  `ingest_outcome = "failed"` processing ends the task failed and the episode stays `processed: false`.
- v4 deletes answer a task that ends (`succeeded`, or what `task_outcome` says) after `task_polls` polls
  of `GET tasks/{uuid}`; the delete is applied when it succeeds. v3 deletes are immediate. Deleting an
  episode leaves the edges derived from it.
- lists page with `next_cursor` (v4) or the `Zep-Next-Cursor` header (v3); v3 episodes come `lastn`.
- search ranks by word overlap (a share of the question's words), drops what shares none, and applies
  `date_filters`, `metadata_filters` (and/or groups, every operator), `node_labels` (v4) and
  `search_filters` (v3) as documented, times compared as instants; a v4 listing applies
  `filters.metadata_filters` (episodes), `date_filters`, `property_filters` (over attributes), `edge_types`
  (edges) and `node_labels` (nodes), and answers another filter field with 400 `unsupported_filter`.
  `listed` counts the objects listings and searches answered (the candidates sent back).
- `fail(mode, times, when)` makes calls fail: 500, a timeout, a refused connection, or 429 with
  `retry-after: 60` as the free plans answer; `latency` delays every answer.
"""

from __future__ import annotations

import asyncio
import re
import uuid as uuidlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import orjson

from tests.adapters import _fake_zep_routes as routes

Variant = Literal["v4", "v3"]
BASE_URL = "https://zep.test"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "in", "on", "is", "and", "of", "to", "its", "it", "does", "when", "where", "what"}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _objects_in(answer: Any) -> int:
    """How many graph objects a listing or search answer holds (v4 `items`, v3 arrays or named arrays)."""
    if isinstance(answer, list):
        return len(answer)
    if isinstance(answer, dict):
        return sum(len(v) for k, v in answer.items() if k in ("items", "edges", "nodes", "episodes")
                   and isinstance(v, list))
    return 0


def _uuid() -> str:
    return str(uuidlib.uuid4())


@dataclass
class _Failure:
    mode: str
    times: int
    when: Callable[[httpx.Request], bool]


@dataclass
class FakeZep:
    variant: Variant = "v4"
    api_key: str = "zep-test-key"
    process_after: float | None = None
    task_polls: int = 1
    task_outcome: str = "succeeded"
    ingest_outcome: str = "succeeded"  # "failed": Zep's worker gives up; the episode stays processed: false
    latency: float = 0.0
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)  # ref -> graph
    edges: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    episodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    listed: int = 0  # objects answered by listings and searches: the candidates memfed was sent
    _failures: list[_Failure] = field(default_factory=list)
    _keys: dict[str, tuple[int, Any]] = field(default_factory=dict)
    _born: dict[str, float] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return BASE_URL

    @property
    def prefix(self) -> str:
        return "/api/v4" if self.variant == "v4" else "/api/v2"

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.respond))

    def fail(self, mode: str, times: int = 1, when: Callable[[httpx.Request], bool] = lambda _: True) -> None:
        self._failures.append(_Failure(mode, times, when))

    # ------------------------------------------------------------------ background work

    def process(self) -> None:
        """Process every episode not yet processed, as Zep's workers eventually do."""
        for episode in list(self.episodes.values()):
            if not episode["processed"]:
                self._derive(episode)

    def _catch_up(self) -> None:
        if self.process_after is None:
            return
        now = asyncio.get_running_loop().time()
        for uuid, born in list(self._born.items()):
            episode = self.episodes.get(uuid)
            if episode is not None and not episode["processed"] and now - born >= self.process_after:
                self._derive(episode)

    def _derive(self, episode: dict[str, Any]) -> None:
        if self.ingest_outcome != "succeeded":  # the ingestion task ends so; nothing is derived
            for task in self.tasks.values():
                if task["type"] == "ingest" and task["episode"] == episode["uuid"]:
                    task["status"] = self.ingest_outcome
            self._born.pop(episode["uuid"], None)
            return
        episode["processed"] = True
        if episode["source"] != "text":
            return
        names = re.findall(r"\b[A-Z][a-z]+\b", episode["content"]) or ["Something"]
        source = self._node_named(episode["graph_uuid"], names[0], ["Entity"], derived_from=episode["uuid"])
        target = self._node_named(episode["graph_uuid"], names[-1] if len(names) > 1 else "Topic", ["Entity"],
                                  derived_from=episode["uuid"])
        edge = self._edge(episode["graph_uuid"], fact=episode["content"].split(".")[0][:200], name="RELATES_TO",
                          source=source, target=target, metadata={}, attributes={})
        edge["episode_uuids"] = [episode["uuid"]]

    # ------------------------------------------------------------------ store

    def _node_named(self, graph: str, name: str, labels: list[str], derived_from: str | None = None) -> dict[str, Any]:
        for node in self.nodes.values():
            if node["graph_uuid"] == graph and node["name"] == name and node["labels"] == labels:
                return node
        node = {"uuid": _uuid(), "graph_uuid": graph, "name": name, "labels": labels, "summary": "",
                "attributes": {}, "metadata": {}, "episode_uuids": [derived_from] if derived_from else [],
                "episode_uuids_truncated": False, "created_at": _now()}
        self.nodes[node["uuid"]] = node
        return node

    def _edge(self, graph: str, *, fact: str, name: str, source: dict[str, Any], target: dict[str, Any],
              metadata: dict[str, Any], attributes: dict[str, Any], valid_at: Any = None, invalid_at: Any = None,
              expired_at: Any = None) -> dict[str, Any]:
        edge = {"uuid": _uuid(), "graph_uuid": graph, "name": name, "fact": fact,
                "source_node_uuid": source["uuid"], "target_node_uuid": target["uuid"],
                "source_node_name": source["name"], "target_node_name": target["name"],
                "attributes": attributes, "metadata": metadata, "episode_uuids": [], "created_at": _now(),
                "valid_at": valid_at, "invalid_at": invalid_at, "expired_at": expired_at, "scope": "entity"}
        self.edges[edge["uuid"]] = edge
        return edge

    def _episode(self, graph: str, data: str, source: str, metadata: dict[str, Any], description: str,
                 reference_time: Any) -> dict[str, Any]:
        episode = {"uuid": _uuid(), "graph_uuid": graph, "content": data, "source": source,
                   "source_description": description, "metadata": metadata, "reference_time": reference_time,
                   "created_at": _now(), "processed": False}
        self.episodes[episode["uuid"]] = episode
        if source == "fact_triple":
            episode["processed"] = True
        else:
            self._born[episode["uuid"]] = asyncio.get_running_loop().time()
        return episode

    def _drop_graph(self, graph: str) -> None:
        for store in (self.edges, self.nodes, self.episodes):
            for uuid in [u for u, o in store.items() if o["graph_uuid"] == graph]:
                del store[uuid]
        self.graphs.pop(graph, None)

    # ------------------------------------------------------------------ transport

    async def respond(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        for failure in self._failures:
            if failure.times > 0 and failure.when(request):
                failure.times -= 1
                if failure.mode == "timeout":
                    raise httpx.ReadTimeout("timed out", request=request)
                if failure.mode == "connect":
                    raise httpx.ConnectError("refused", request=request)
                if failure.mode == "429":
                    return httpx.Response(429, headers={"retry-after": "60", "x-ratelimit-remaining": "0"},
                                          json=self._error("rate_limited", "too many requests"))
                return httpx.Response(500, json=self._error("internal", "server error"))
        if request.headers.get("authorization") != f"Api-Key {self.api_key}":
            return httpx.Response(401, json=self._error("unauthorized", "bad api key"))
        self._catch_up()
        key = request.headers.get("idempotency-key")
        if self.variant == "v4" and key and request.method != "GET" and key in self._keys:
            status, body = self._keys[key]
            return httpx.Response(status, json=body)
        path = request.url.path
        if not path.startswith(self.prefix):
            return httpx.Response(404, json=self._error("not_found", "no such route"))
        body = orjson.loads(request.content) if request.content else None
        try:
            status, answer, headers = routes.route(self, request.method, path[len(self.prefix):],
                                                   dict(request.url.params), body)
        except routes.Refusal as refusal:
            status, answer, headers = refusal.status, self._error(refusal.code, refusal.message), {}
        if self.variant == "v4" and key and request.method != "GET" and status < 500:
            self._keys[key] = (status, answer)
        graph_objects = (path.endswith("/list") and not path.endswith("/graphs/list")) or "/search" in path \
            or path.count("/graph/") >= 2  # v3 lists a graph's objects under graph/<kind>/graph/<id>
        if status == 200 and graph_objects:
            self.listed += _objects_in(answer)
        return httpx.Response(status, json=answer, headers=headers)

    def _error(self, code: str, message: str) -> dict[str, Any]:
        if self.variant == "v4":
            return {"error": {"code": code, "message": message, "param": None, "details": None,
                              "request_id": _uuid()}}
        return {"message": message}

    # ------------------------------------------------------------------ search

    def score(self, text: str, query: str) -> float:
        asked = _words(query)
        return len(asked & _words(text)) / len(asked) if asked else 0.0


@asynccontextmanager
async def zep_provider(variant: Variant = "v4", fake: FakeZep | None = None, **options: Any) -> AsyncIterator[Any]:
    """A `ZepProvider` over a fake of `variant`, through an httpx client on the fake's transport."""
    from adapters.zep import ZepProvider

    fake = fake or FakeZep(variant)
    async with fake.client() as client:
        yield ZepProvider(client, base_url=fake.base_url, api_key=fake.api_key, variant=variant,
                          task_poll=0.001, **options)
