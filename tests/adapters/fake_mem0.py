"""A stateful fake of both mem0 HTTP variants, at the transport, after shared/vendors/mem0.md.

`FakeMem0("platform")` answers like the hosted Platform (`Authorization: Token`, paths ending in `/`, v3
add/search/list, v1 get/update/delete/history); `FakeMem0("oss")` like the self-hosted REST server
(`X-API-Key`, bare paths, a trailing slash does not match). What the vendor refuses, the fake refuses the
same way: no credential (401), entity ids at the top of a v3 search or list (400), an OSS search or list
without an entity id (400), an OR of entities on OSS (400), an inferred OSS add with no LLM (502). What
the vendor does quietly, the fake does too: the OSS list stops at 20 unless told `top_k`, history rows
outlive a delete, the default search threshold hides weak matches.

The OSS fake also does what a real OSS server (mem0ai 2.2.1, faiss) was observed to do (shared/vendors/
mem0.md, "The real OSS server, observed"), through `respond`, the transport's handler:
- a call that changes the server while another change is still running there fails with 502, is applied
  anyway when it is a PUT or a DELETE, and leaves the index corrupt: from then on a search ranks every
  memory by another memory's text (`corrupt`, `collisions`);
- scores are similarities in [-1, 1]: a memory sharing no word with the question scores below 0, and the
  threshold (0 included) drops it;
- the candidate pool is cut before the entity filter: the 2 x max(4 x top_k, 60) best memories of the
  whole server are taken first, and only then those of the asked entity;
- a listing returns at most 1,000 memories of one entity; adds past that are accepted;
- the real shapes: get and search items always carry `metadata` (null when empty), get adds
  `"score": null`, add results add `"actor_id": null`, the server's own failures are 502 with
  `{"detail", "code": "provider_unavailable", "request_id"}`.
`handle` is the same answer without the timing (no collision can happen in it): for callers that cannot
await.

"Meaning" is word overlap: the share of the question's words found in the memory, so a test can tell
which memory should rank first.

Tests make it fail on purpose with `fail(...)`: a 500, a timeout, a refused connection, a body that is
not JSON, a 429 with Retry-After. Some failures keep the write although the client never learns it, as a
real server does once a request has reached it: `applied_timeout` (the answer is lost on the way back),
`applied_502` (the server stored the change and still answered 502, as the OSS server was seen to do),
`applied_drop` (the connection drops after the write), `late` (the client times out at once and the write
lands only when the test calls `land()`), and `hold` (the write is applied and the answer withheld until
`release()`, so a test can kill the client mid-call).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

Variant = Literal["platform", "oss"]
FailMode = Literal[
    "500", "timeout", "connect", "garbage", "429", "applied", "applied_timeout", "applied_502", "applied_drop",
    "late", "hold",
]
# Failures that happen after the fake has done what the request asked.
_AFTER_APPLYING = ("applied_timeout", "applied_502", "applied_drop", "hold")
# "applied": the request is carried out and then answered as the OSS server's own failure (502), as an
# update was seen to be.

PLATFORM_URL = "https://api.mem0.ai"
OSS_URL = "http://mem0.test:8888"
ENTITY_KEYS = ("user_id", "agent_id", "app_id", "run_id")
OSS_ENTITY_KEYS = ("user_id", "agent_id", "run_id")
OSS_LIST_CAP = 1000  # GET /memories answers at most this many memories of one entity
# What a colliding change does besides failing: the observed server applied an update it answered 502.
COLLISION_APPLIES = ("PUT", "DELETE")


@dataclass
class _Failure:
    mode: FailMode
    times: int
    retry_after: str | None
    when: Callable[[httpx.Request], bool]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _answer(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, json=body)


class FakeMem0:
    def __init__(self, variant: Variant, api_key: str | None = "m0-SECRET-test-key-7f3a9c", *, seed: int = 7):
        self.variant = variant
        self.api_key = api_key
        self.base_url = PLATFORM_URL if variant == "platform" else OSS_URL
        self.memories: dict[str, dict[str, Any]] = {}
        self.histories: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[httpx.Request] = []
        self._failures: list[_Failure] = []
        # mem0 keeps history rows after a delete; a test sets this False to see an erase that leaves nothing.
        self.keep_history_after_delete = True
        self._rng = random.Random(seed)
        self._now = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
        self.parked: list[httpx.Request] = []  # `late` requests the client gave up on, not applied yet
        self._released: asyncio.Event | None = None
        # OSS only: how long one change occupies the server, the changes running now, the changes that
        # arrived while another ran, and whether such a collision has corrupted the search index.
        self.write_seconds = 0.0
        self._changing = 0
        self.collisions: list[httpx.Request] = []
        self.corrupt = False

    # ------------------------------------------------------------------ test controls

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.respond)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport)

    def fail(
        self,
        mode: FailMode,
        *,
        times: int = 1,
        retry_after: str | None = None,
        when: Callable[[httpx.Request], bool] | None = None,
    ) -> None:
        """The next `times` requests (that `when` accepts) fail this way instead of being answered."""
        self._failures.append(_Failure(mode, times, retry_after, when or (lambda _r: True)))

    def land(self) -> int:
        """Apply the `late` requests now, long after their client gave up; returns how many."""
        parked, self.parked = self.parked, []
        for request in parked:
            self._respond(request)
        return len(parked)

    def release(self) -> None:
        """Let the answers withheld by `hold` go out."""
        self._hold_event().set()

    def _hold_event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def entity_of(self, vendor_id: str) -> str | None:
        memory = self.memories.get(vendor_id)
        return memory["user_id"] if memory else None

    def bodies(self, method: str | None = None) -> list[Any]:
        return [
            json.loads(r.content) if r.content else None
            for r in self.requests
            if method is None or r.method == method
        ]

    def add_raw(self, user_id: str, text: str, metadata: dict[str, Any] | None = None) -> str:
        """A memory written by someone other than memfed (mem0 itself, another client)."""
        return self._store({"user_id": user_id}, text, metadata or {}, role="user")

    # ------------------------------------------------------------------ plumbing

    def _tick(self) -> str:
        self._now += timedelta(seconds=1)
        if self.variant == "platform":
            return self._now.strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._now.isoformat()

    def _new_id(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def handle(self, request: httpx.Request) -> Any:
        """The answer to one request: a response, or (`hold`) a coroutine that gives it later."""
        self.requests.append(request)
        for failure in self._failures:
            if failure.times > 0 and failure.when(request):
                failure.times -= 1
                if failure.mode in _AFTER_APPLYING:
                    applied = self._respond(request)
                    if failure.mode == "hold":
                        return self._withheld(applied)
                return self._failed(failure, request)
        return self._respond(request)

    async def _withheld(self, response: httpx.Response) -> httpx.Response:
        await self._hold_event().wait()
        return response

    def _respond(self, request: httpx.Request) -> httpx.Response:
        if not self._authorized(request):
            detail = "Invalid API key" if self.variant == "platform" else "Authentication required."
            return _answer(401, {"detail": detail})
        try:
            body = json.loads(request.content) if request.content else None
        except ValueError:
            return _answer(422, {"detail": "body is not JSON"})
        if self.variant == "platform":
            return self._platform(request, body)
        return self._oss(request, body)

    async def respond(self, request: httpx.Request) -> httpx.Response:
        """`handle`, timed as the server runs it: on OSS a change takes `write_seconds`, and a change that
        arrives while another is running collides with it (see the module docstring)."""
        if self.variant != "oss" or not self._changes_the_server(request):
            return await self._answered(request)
        if self._changing:
            return self._collide(request)
        self._changing += 1
        try:
            await asyncio.sleep(self.write_seconds)
            return await self._answered(request)
        finally:
            self._changing -= 1

    async def _answered(self, request: httpx.Request) -> httpx.Response:
        answer = self.handle(request)
        return await answer if inspect.isawaitable(answer) else answer  # `hold` answers later

    @staticmethod
    def _changes_the_server(request: httpx.Request) -> bool:
        return request.method in ("PUT", "DELETE") or (request.method == "POST" and request.url.path == "/memories")

    def _collide(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.collisions.append(request)
        self.corrupt = True
        if request.method in COLLISION_APPLIES and self._authorized(request):
            self._oss(request, json.loads(request.content) if request.content else None)
        detail = "RuntimeError: Error in faiss::IndexFlat::reconstruct: key < ntotal failed"
        return self._server_failure(detail)

    def _server_failure(self, detail: str) -> httpx.Response:
        """How the OSS server answers its own failures (a store error, no LLM for an inferred add)."""
        return _answer(502, {"detail": detail, "code": "provider_unavailable", "request_id": self._new_id()})

    def _failed(self, failure: _Failure, request: httpx.Request) -> httpx.Response:
        if failure.mode in ("timeout", "applied_timeout"):
            raise httpx.ReadTimeout("timed out", request=request)
        if failure.mode == "late":
            self.parked.append(request)
            raise httpx.ReadTimeout("timed out", request=request)
        if failure.mode == "applied_drop":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        if failure.mode == "applied_502":
            # The OSS server's own failure shape (shared/vendors/mem0.md).
            return _answer(502, {"detail": "RuntimeError: IndexFlat::reconstruct: key < ntotal",
                                 "code": "provider_unavailable", "request_id": self._new_id()})
        if failure.mode == "connect":
            raise httpx.ConnectError("connection refused", request=request)
        if failure.mode == "garbage":
            return httpx.Response(200, content=b"<html>gateway hiccup</html>", headers={"content-type": "text/html"})
        if failure.mode == "429":
            headers = {"Retry-After": failure.retry_after} if failure.retry_after is not None else {}
            return httpx.Response(429, json={"detail": "Too many requests"}, headers=headers)
        if failure.mode == "applied":
            body = json.loads(request.content) if request.content else None
            (self._platform if self.variant == "platform" else self._oss)(request, body)
            return self._server_failure("RuntimeError: the store failed after the change was written")
        return _answer(500, {"detail": "internal error"})

    def _authorized(self, request: httpx.Request) -> bool:
        if self.api_key is None:
            return True
        if self.variant == "platform":
            return request.headers.get("authorization") == f"Token {self.api_key}"
        return request.headers.get("x-api-key") == self.api_key

    # ------------------------------------------------------------------ shared state changes

    def _store(self, entities: dict[str, Any], text: str, metadata: dict[str, Any], *, role: str) -> str:
        vendor_id = self._new_id()
        at = self._tick()
        self.memories[vendor_id] = {
            "id": vendor_id,
            "memory": text,
            "user_id": entities.get("user_id"),
            "agent_id": entities.get("agent_id"),
            "run_id": entities.get("run_id"),
            "metadata": dict(metadata),
            "role": role,
            "created_at": at,
            "updated_at": at,
        }
        self._event(vendor_id, None, text, "ADD", at)
        return vendor_id

    def _event(self, vendor_id: str, old: str | None, new: str | None, event: str, at: str) -> None:
        memory = self.memories[vendor_id]
        row: dict[str, Any] = {
            "id": self._new_id(),
            "memory_id": vendor_id,
            "old_memory": old,
            "new_memory": new,
            "event": event,
            "created_at": memory["created_at"],
            "updated_at": at,
        }
        if self.variant == "platform":
            row.update({"user_id": memory["user_id"], "input": [], "metadata": None, "categories": []})
        else:
            row.update({"is_deleted": event == "DELETE", "actor_id": None, "role": memory["role"]})
        self.histories.setdefault(vendor_id, []).append(row)

    def _update(self, vendor_id: str, body: dict[str, Any], *, merge_metadata: bool) -> None:
        memory = self.memories[vendor_id]
        old = memory["memory"]
        if body.get("text") is not None:
            memory["memory"] = body["text"]
        if body.get("metadata") is not None:
            incoming = {k: v for k, v in body["metadata"].items() if k not in ENTITY_KEYS}
            memory["metadata"] = {**memory["metadata"], **incoming} if merge_metadata else incoming
        at = self._tick()
        memory["updated_at"] = at
        self._event(vendor_id, old, memory["memory"], "UPDATE", at)

    def _delete(self, vendor_id: str) -> None:
        memory = self.memories[vendor_id]
        self._event(vendor_id, memory["memory"], None, "DELETE", self._tick())
        del self.memories[vendor_id]
        if not self.keep_history_after_delete:
            del self.histories[vendor_id]

    def _scored(
        self, query: str, allowed: Callable[[dict[str, Any]], bool], top_k: int, threshold: float
    ) -> list[tuple[float, dict[str, Any]]]:
        asked = _words(query)
        scored = []
        for memory in self.memories.values():
            if not allowed(memory):
                continue
            score = round(len(asked & _words(memory["memory"])) / len(asked), 4) if asked else 0.0
            if score >= threshold:
                scored.append((score, memory))
        scored.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        return scored[:top_k]

    def _oss_scored(
        self, query: str, entities: dict[str, Any], top_k: int, threshold: float
    ) -> list[tuple[float, dict[str, Any]]]:
        """The OSS server's search as observed: cosine similarities in [-1, 1] (no shared word is below
        0), the pool of the whole server's nearest memories cut first, then the entity, then the threshold."""
        asked = _words(query)
        everyone = sorted(self.memories.values(), key=lambda m: m["id"])
        # A corrupt index answers a memory's place with another memory's vector.
        texts = [m["memory"] for m in everyone]
        if self.corrupt and len(texts) > 1:
            texts = texts[1:] + texts[:1]
        ranked = []
        for memory, text in zip(everyone, texts, strict=True):
            shared = len(asked & _words(text))
            ranked.append((round(shared / len(asked), 4) if shared else -0.1, memory))
        ranked.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        pool = ranked[: 2 * max(4 * top_k, 60)]
        kept = [(s, m) for s, m in pool if self._oss_match(m, entities) and s >= threshold]
        return kept[:top_k]

    # ------------------------------------------------------------------ the Platform

    def _platform_item(self, memory: dict[str, Any], *, run_key: str = "session_id") -> dict[str, Any]:
        return {
            "id": memory["id"],
            "memory": memory["memory"],
            "user_id": memory["user_id"],
            "agent_id": memory["agent_id"],
            "app_id": None,
            run_key: memory["run_id"],
            "metadata": memory["metadata"] or None,
            "categories": [],
            "created_at": memory["created_at"],
            "updated_at": memory["updated_at"],
            "expiration_date": None,
            "structured_attributes": {"year": 2026},
            "replaced_by": None,
            "lifecycle_state": "active",
        }

    @staticmethod
    def _platform_entities(filters: Any) -> set[str] | None:
        """The user_ids a v3 filter names (flat or an OR of flat ones); None when it names none."""
        if not isinstance(filters, dict):
            return None
        if isinstance(filters.get("user_id"), str):
            return {filters["user_id"]}
        if isinstance(filters.get("OR"), list):
            named = [f.get("user_id") for f in filters["OR"] if isinstance(f, dict)]
            names = [n for n in named if isinstance(n, str)]
            if named and len(names) == len(named):  # every one of them names a user
                return set(names)
        return None

    @staticmethod
    def _matches_entity(memory: dict[str, Any], names: set[str]) -> bool:
        # `*` in a mem0 filter means "any non-null value".
        return memory["user_id"] is not None and ("*" in names or memory["user_id"] in names)

    def _platform(self, request: httpx.Request, body: Any) -> httpx.Response:
        path, method = request.url.path, request.method
        if not path.endswith("/"):
            return _answer(404, {"detail": "Not found."})
        if path == "/v1/ping/" and method == "GET":
            return _answer(200, {"status": "ok", "org_id": "org_1", "project_id": "prj_1", "user_email": "x@y"})
        if path == "/v3/memories/add/" and method == "POST":
            return self._platform_add(body)
        if path == "/v3/memories/search/" and method == "POST":
            return self._platform_search(body)
        if path == "/v3/memories/" and method == "POST":
            return self._platform_list(request, body)
        if path == "/v1/memories/" and method == "DELETE":
            names = {request.url.params[k] for k in ENTITY_KEYS if k in request.url.params}
            if not names:
                return _answer(400, {"error": "At least one filter is required"})
            for vendor_id in [m["id"] for m in self.memories.values() if self._matches_entity(m, names)]:
                self._delete(vendor_id)
            return _answer(200, {"message": "Delete in progress. This may take some time."})
        match = re.fullmatch(r"/v1/memories/([^/]+)/(history/)?", path)
        if match is None:
            return _answer(404, {"detail": "Not found."})
        vendor_id, history = match.group(1), match.group(2)
        try:
            uuid.UUID(vendor_id)
        except ValueError:
            return _answer(400, {"error": "memory_id should be a valid UUID"})
        if history:
            if method != "GET":
                return _answer(405, {"detail": "Method not allowed"})
            return _answer(200, self.histories.get(vendor_id, []))
        if vendor_id not in self.memories:
            return _answer(404, {"error": "Memory not found!"})
        if method == "GET":
            return _answer(200, self._platform_item(self.memories[vendor_id]))
        if method == "PUT":
            if not isinstance(body, dict) or not ({"text", "metadata", "expiration_date"} & set(body)):
                return _answer(400, {"error": "At least one of text, metadata or expiration_date is required"})
            # Whether the Platform merges or replaces metadata on update is not documented; replacing is
            # the stricter of the two for an adapter that must send everything it keeps.
            self._update(vendor_id, body, merge_metadata=False)
            return _answer(200, self._platform_item(self.memories[vendor_id]))
        if method == "DELETE":
            self._delete(vendor_id)
            return _answer(200, {"message": "Memory deleted successfully!"})
        return _answer(405, {"detail": "Method not allowed"})

    def _platform_add(self, body: Any) -> httpx.Response:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _answer(400, {"error": "messages is required"})
        entities = {k: body[k] for k in ENTITY_KEYS if body.get(k)}
        if not entities:
            return _answer(400, {"error": "At least one of user_id, agent_id, app_id or run_id is required"})
        if body.get("infer", True):
            return _answer(200, {"event_id": self._new_id(), "status": "PENDING"})
        results = []
        for message in body["messages"]:
            vendor_id = self._store(entities, message["content"], body.get("metadata") or {}, role=message["role"])
            results.append({"id": vendor_id, "data": {"memory": message["content"]}, "event": "ADD"})
        return _answer(200, {"message": "Memories added", "results": results})

    def _platform_search(self, body: Any) -> httpx.Response:
        if not isinstance(body, dict) or not str(body.get("query") or "").strip():
            return _answer(400, {"error": "query is required"})
        if any(k in body for k in ENTITY_KEYS):
            return _answer(400, {"error": "Entity ids must be passed inside filters"})
        names = self._platform_entities(body.get("filters"))
        if names is None:
            return _answer(400, {"error": "filters must include at least one entity id"})
        top_k = body.get("top_k", 10)
        threshold = body.get("threshold", 0.1)
        if not isinstance(top_k, int) or not 1 <= top_k <= 1000 or not 0 <= threshold <= 1:
            return _answer(400, {"error": "top_k must be 1..1000 and threshold 0..1"})
        scored = self._scored(body["query"], lambda m: self._matches_entity(m, names), top_k, threshold)
        results = []
        for score, memory in scored:
            item = self._platform_item(memory, run_key="run_id")
            item.update({"score": score, "score_breakdown": {"semantic": score, "bm25": 0.0, "entity": 0.0}})
            results.append(item)
        return _answer(200, {"results": results})

    def _platform_list(self, request: httpx.Request, body: Any) -> httpx.Response:
        try:
            page = int(request.url.params.get("page", 1))
            size = int(request.url.params.get("page_size", 100))
        except ValueError:
            return _answer(400, {"error": "page and page_size are integers"})
        if page < 1 or not 1 <= size <= 200:
            return _answer(400, {"error": "page >= 1, page_size 1..200"})
        if not isinstance(body, dict) or any(k in body for k in ENTITY_KEYS):
            return _answer(400, {"error": "Entity ids must be passed inside filters"})
        names = self._platform_entities(body.get("filters"))
        if names is None:
            return _answer(400, {"error": "filters must include at least one entity id"})
        found = sorted(
            (m for m in self.memories.values() if self._matches_entity(m, names)),
            key=lambda m: (m["created_at"], m["id"]),
            reverse=True,
        )
        chunk = found[(page - 1) * size : page * size]

        def link(p: int) -> str:
            return f"{PLATFORM_URL}/v3/memories/?{urlencode({'page': p, 'page_size': size})}"

        return _answer(
            200,
            {
                "count": len(found),
                "next": link(page + 1) if page * size < len(found) else None,
                "previous": link(page - 1) if page > 1 else None,
                "results": [self._platform_item(m) for m in chunk],
            },
        )

    # ------------------------------------------------------------------ the OSS server

    @staticmethod
    def _oss_item(memory: dict[str, Any], *, always_metadata: bool = False) -> dict[str, Any]:
        """A memory as the OSS server shows it; get and search always carry `metadata` (null if empty)."""
        item: dict[str, Any] = {
            "id": memory["id"],
            "memory": memory["memory"],
            "hash": "0" * 32,
            "created_at": memory["created_at"],
            "updated_at": memory["updated_at"],
            "role": memory["role"],
        }
        for key in OSS_ENTITY_KEYS:
            if memory[key] is not None:
                item[key] = memory[key]
        if memory["metadata"]:
            item["metadata"] = dict(memory["metadata"])
        elif always_metadata:
            item["metadata"] = None
        return item

    @staticmethod
    def _oss_match(memory: dict[str, Any], entities: dict[str, Any]) -> bool:
        return all(memory.get(k) == v for k, v in entities.items())

    def _oss(self, request: httpx.Request, body: Any) -> httpx.Response:
        path, method, params = request.url.path, request.method, request.url.params
        if path == "/memories" and method == "POST":
            return self._oss_add(body)
        if path == "/memories" and method == "GET":
            entities = {k: params[k] for k in OSS_ENTITY_KEYS if params.get(k)}
            if not entities:
                return _answer(400, {"detail": "At least one identifier is required."})
            try:
                top_k = int(params.get("top_k", 20))
            except ValueError:
                return _answer(422, {"detail": "top_k is an integer"})
            if not 0 <= top_k <= OSS_LIST_CAP:
                return _answer(422, {"detail": f"top_k must be between 0 and {OSS_LIST_CAP}"})
            # The vector store's order: no promise at all (here, the order of the random ids).
            found = sorted((m for m in self.memories.values() if self._oss_match(m, entities)), key=lambda m: m["id"])
            return _answer(200, {"results": [self._oss_item(m) for m in found[:top_k]]})
        if path == "/memories" and method == "DELETE":
            entities = {k: params[k] for k in OSS_ENTITY_KEYS if params.get(k)}
            if not entities:
                return _answer(400, {"detail": "At least one identifier is required."})
            for vendor_id in [m["id"] for m in self.memories.values() if self._oss_match(m, entities)]:
                self._delete(vendor_id)
            return _answer(200, {"message": "All relevant memories deleted"})
        if path == "/search" and method == "POST":
            return self._oss_search(body)
        if path == "/entities" and method == "GET":
            return _answer(200, self._oss_entities())
        match = re.fullmatch(r"/memories/([^/]+)(/history)?", path)
        if match is None:  # a trailing slash lands here too: the server does not redirect it
            return _answer(404, {"detail": "Not Found"})
        vendor_id, history = match.group(1), match.group(2)
        if history:
            return _answer(200, self.histories.get(vendor_id, []))
        memory = self.memories.get(vendor_id)
        if method == "GET":
            return _answer(200, {**self._oss_item(memory, always_metadata=True), "score": None} if memory else None)
        if memory is None:
            return _answer(404, {"detail": f"Memory with id {vendor_id} not found"})
        if method == "PUT":
            if not isinstance(body, dict) or not ({"text", "metadata", "expiration_date"} & set(body)):
                return _answer(400, {"detail": "At least one of text, metadata, or expiration_date"})
            self._update(vendor_id, body, merge_metadata=True)  # the OSS library merges payload keys
            return _answer(200, {"message": "Memory updated successfully!"})
        if method == "DELETE":
            self._delete(vendor_id)
            return _answer(200, {"message": "Memory deleted successfully"})
        return _answer(405, {"detail": "Method Not Allowed"})

    def _oss_entities(self) -> list[dict[str, Any]]:
        """Every entity the server holds memories of, with how many (`GET /entities`)."""
        totals: dict[tuple[str, str], int] = {}
        for memory in self.memories.values():
            for key, kind in (("user_id", "user"), ("agent_id", "agent"), ("run_id", "run")):
                if memory[key] is not None:
                    totals[(kind, memory[key])] = totals.get((kind, memory[key]), 0) + 1
        return [{"id": name, "type": kind, "total_memories": n, "created_at": None, "updated_at": None}
                for (kind, name), n in sorted(totals.items())]

    def _oss_add(self, body: Any) -> httpx.Response:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _answer(422, {"detail": "messages is required"})
        entities = {k: body[k] for k in OSS_ENTITY_KEYS if body.get(k)}
        if not entities:
            return _answer(400, {"detail": "At least one identifier (user_id, agent_id, run_id) is required."})
        if body.get("infer") is not False:
            return self._server_failure("The LLM provider is not configured.")
        results = []
        for message in body["messages"]:
            if message.get("role") == "system":
                continue  # the OSS library skips system messages when it does not infer
            vendor_id = self._store(entities, message["content"], body.get("metadata") or {}, role=message["role"])
            results.append({"id": vendor_id, "memory": message["content"], "event": "ADD", "role": message["role"],
                            "actor_id": None})
        return _answer(200, {"results": results})

    def _oss_search(self, body: Any) -> httpx.Response:
        if not isinstance(body, dict) or not str(body.get("query") or "").strip():
            return _answer(422, {"detail": "query is required"})
        filters = dict(body.get("filters") or {})
        for key in OSS_ENTITY_KEYS:  # deprecated top-level ids are moved into filters
            if body.get(key):
                filters[key] = body[key]
        if "OR" in filters or not any(filters.get(k) for k in OSS_ENTITY_KEYS):
            return _answer(400, {"detail": "filters must contain at least one of: user_id, agent_id, run_id"})
        entities = {k: filters[k] for k in OSS_ENTITY_KEYS if filters.get(k)}
        top_k = body.get("top_k", 20)
        threshold = body.get("threshold", 0.1)
        scored = self._oss_scored(body["query"], entities, top_k, threshold)
        return _answer(200, {"results": [{**self._oss_item(m, always_metadata=True), "score": s} for s, m in scored]})


@asynccontextmanager
async def mem0_provider(variant: Variant, fake: FakeMem0 | None = None, **options: Any) -> AsyncIterator[Any]:
    """A `Mem0Provider` over a fake of `variant`, through an httpx client on the fake's transport."""
    from adapters.mem0 import Mem0Provider

    fake = fake or FakeMem0(variant)
    async with fake.client() as client:
        yield Mem0Provider(
            client,
            base_url=fake.base_url,
            api_key=fake.api_key or "",
            variant=variant,
            **options,
        )
