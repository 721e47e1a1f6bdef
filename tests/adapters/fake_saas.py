"""A stateful fake of the SaaS Memory API at the HTTP transport, after shared/vendors/saas-memory.md.

It speaks the wire that page fixes (paths, bodies, `{"error": {code, message}}`) and does what the product
documentation (shared/spec/saas-memory-api.txt) says the service does:
- the tenant comes from the API key (`Authorization: Bearer`), never from the request: a `tenant` or
  `tenant_id` anywhere in a request is refused (400 invalid_request), as is any field the wire does not
  name, so an adapter that misspells a field fails here;
- recall fuses a lexical list (records sharing a word with the query, by how many distinct query words they
  hold) and a vector list (cosine of an embedding, when `embedding` is on) by reciprocal rank fusion
  (k = 60), then weights the fused score by importance (x (0.5 + 0.5 importance)), recency (x (0.5 + 0.5
  r), r halving every 30 days of the record's age) and tier (core x 1.25, archival x 0.8, and archival
  only on a strong match: every query word present, or cosine >= 0.6); without a query it is a filter-only
  listing by tier, then importance, then recency. Expired and superseded records only when asked;
- the embedding is this fake's own and deterministic: hashed character trigrams of the lower-cased words,
  512 buckets, no model, and a similarity floor of 0.15 for the vector list. It stands for "meaning" only
  as far as shared spelling goes. Record ids are numbered in order of storing, so ties break the same way
  on every run;
- privacy: recall with `actor_id` sees that actor's records and tenant-shared ones (no actor), never
  another actor's, and the vector list is re-checked against the same filter;
- supersession keeps history (`superseded_by`, `supersedes`); superseding a superseded record is 409;
- forget deletes permanently, by ids or by a selector ANDed over actor, app, scope, category, before; an
  empty selector is 400 `empty_selector`;
- a tenant's record cap (every stored record, history included) refuses a store past it with 409
  `record_cap_exceeded`, evicting nothing; a token quota (words embedded, when embedding is on) refuses
  with 402 `token_quota_exceeded` before anything is written;
- ingest queues a job (202 `{job_id}`) that moves queued -> running -> done one poll at a time: `raw`
  stores the transcript as one episodic record, `smart` stores each statement of it (a sentence of four
  words or more that is not a question) as a semantic record;
- writes honour `Idempotency-Key` (the first answer is replayed); export and import are NDJSON (record ids
  are one space across tenants here, so an import skips an id any tenant holds).

Tests make it fail on purpose with `fail(...)`: a 500, a 429 with Retry-After, a timeout before or after the
write is applied.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
import orjson

BASE_URL = "https://memory.example.com/api/memory/v1"
KEY = "sk-saas-SECRET-test-key-41c2"
FailMode = Literal["500", "429", "timeout", "applied_timeout"]

_STORE_FIELDS = {"content", "kind", "tier", "importance", "category", "actor_id", "app_id", "scope_id",
                 "agent_id", "session_id", "expires_at", "metadata"}
_PATCH_FIELDS = {"content", "importance", "tier", "category", "expires_at", "metadata"}
_RECALL_FIELDS = {"query", "actor_id", "app_id", "scope_id", "kind", "tier", "category", "limit",
                  "include_superseded", "include_expired"}
_SELECTOR = ("actor_id", "app_id", "scope_id", "category", "before")
_LIST_PARAMS = {"actor_id", "app_id", "scope_id", "kind", "tier", "category", "status", "limit", "cursor"}
_TIER_ORDER = {"core": 0, "contextual": 1, "archival": 2}
_TIER_WEIGHT = {"core": 1.25, "contextual": 1.0, "archival": 0.8}
_WORD = re.compile(r"[a-z0-9]+")
_DIM = 512
VECTOR_FLOOR = 0.15  # below it a record is no vector candidate: trigram noise, not likeness


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def embed(text: str) -> list[float]:
    """The fake's deterministic embedding: hashed character trigrams of each word, L2-normalized."""
    vector = [0.0] * _DIM
    for word in words(text):
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            bucket = int.from_bytes(hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest(), "big")
            vector[bucket % _DIM] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class _Refusal(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _when(value: Any, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise _Refusal(400, "invalid_request", f"{what} is not ISO 8601") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


class FakeSaas:
    def __init__(self, *, keys: dict[str, str] | None = None, cap: int = 10_000, token_quota: int | None = None,
                 embedding: bool = True, now: Callable[[], datetime] | None = None) -> None:
        self.keys = keys if keys is not None else {KEY: "tenant-a"}
        self.cap = cap
        self.token_quota = token_quota
        self.tokens_used: dict[str, int] = {}
        self.embedding = embedding
        self.now = now or (lambda: datetime.now(UTC))
        self.records: dict[str, dict[str, Any]] = {}  # id -> record, with "_tenant" and "_vector" kept aside
        self.jobs: dict[str, dict[str, Any]] = {}
        self.activity: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self._replays: dict[tuple[str, str], httpx.Response] = {}
        self._failures: list[tuple[FailMode, str | None, float]] = []
        self._made = 0
        self.answered_codes: list[str] = []  # the error code of every refusal, in order
        self.slow: dict[str, int] = {}  # method -> extra turns its requests wait, to order a race

    # ------------------------------------------------------------------ test hooks

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.respond)

    async def respond(self, request: httpx.Request) -> httpx.Response:
        """`handle`, after giving other tasks a turn, as a network round trip would: calls made at once
        interleave, so a read-then-write race can happen here as it does at the real service."""
        for _ in range(1 + self.slow.get(request.method, 0)):
            await asyncio.sleep(0)
        return self.handle(request)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport())

    def fail(self, mode: FailMode, *, times: int = 1, path: str | None = None, retry_after: float = 7) -> None:
        """The next `times` requests (to a path starting with `path`, if given) fail this way."""
        self._failures.extend([(mode, path, retry_after)] * times)

    def put(self, tenant: str = "tenant-a", **fields: Any) -> str:
        """A record stored directly, as another client of the tenant would store it."""
        return self._store(tenant, fields)["id"]

    def bodies(self, method: str, path: str) -> list[Any]:
        return [body for m, p, _, body in self.requests if m == method and p == path]

    # ------------------------------------------------------------------ dispatch

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix(httpx.URL(BASE_URL).path)
        params = dict(request.url.params)
        raw = request.content
        body: Any = None
        if raw and request.url.path.endswith("/import"):
            body = raw.decode()
        elif raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return self._error(_Refusal(400, "invalid_request", "the body is not JSON"))
        self.requests.append((request.method, path, params, body))
        failure = self._failure(path)
        if failure is not None and failure[0] in ("500", "429", "timeout"):
            return self._injected(failure, request)
        try:
            tenant = self._tenant(request)
            if "tenant" in params or "tenant_id" in params or (
                    isinstance(body, dict) and ({"tenant", "tenant_id"} & body.keys())):
                raise _Refusal(400, "invalid_request", "the tenant comes from the API key, never from a request")
            key = request.headers.get("idempotency-key")
            if key and (tenant, key) in self._replays:
                return self._replays[(tenant, key)]
            response = self._route(tenant, request.method, path, params, body)
            if key and request.method in ("POST", "PATCH") and response.status_code < 500:
                self._replays[(tenant, key)] = response
        except _Refusal as refusal:
            self.answered_codes.append(refusal.code)
            response = self._error(refusal)
        if failure is not None:  # applied_timeout: the write happened, the answer is lost
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response

    def _failure(self, path: str) -> tuple[FailMode, str | None, float] | None:
        for i, (mode, prefix, after) in enumerate(self._failures):
            if prefix is None or path.startswith(prefix):
                del self._failures[i]
                return mode, prefix, after
        return None

    def _injected(self, failure: tuple[FailMode, str | None, float], request: httpx.Request) -> httpx.Response:
        mode, _, after = failure
        if mode == "timeout":
            raise httpx.ReadTimeout("the fake timed out", request=request)
        if mode == "429":
            return self._error(_Refusal(429, "rate_limited", "slow down", {"Retry-After": f"{after:g}"}))
        # A careless server echoes the credential in its error: the adapter must never repeat it.
        said = request.headers.get("authorization", "")
        return self._error(_Refusal(500, "internal", f"the fake failed on purpose for {said}"))

    @staticmethod
    def _error(refusal: _Refusal) -> httpx.Response:
        return httpx.Response(refusal.status, json={"error": {"code": refusal.code, "message": refusal.message}},
                              headers=refusal.headers)

    def _tenant(self, request: httpx.Request) -> str:
        header = request.headers.get("authorization", "")
        tenant = self.keys.get(header.removeprefix("Bearer ")) if header.startswith("Bearer ") else None
        if tenant is None:
            raise _Refusal(401, "unauthorized", "no valid API key")
        return tenant

    def _route(self, tenant: str, method: str, path: str, params: dict[str, str], body: Any) -> httpx.Response:
        parts = path.strip("/").split("/")
        match method, parts:
            case "POST", ["records"]:
                return httpx.Response(201, json=self._public(self._store(tenant, self._fields(body, _STORE_FIELDS))))
            case "GET", ["records"]:
                return httpx.Response(200, json=self._list(tenant, params))
            case "GET", ["records", rid]:
                return httpx.Response(200, json=self._public(self._own(tenant, rid)))
            case "PATCH", ["records", rid]:
                return httpx.Response(200, json=self._public(self._patch(tenant, rid, body)))
            case "POST", ["records", rid, "supersede"]:
                return httpx.Response(201, json=self._public(self._supersede(tenant, rid, body)))
            case "POST", ["recall"]:
                return httpx.Response(200, json=self._recall(tenant, self._fields(body, _RECALL_FIELDS)))
            case "POST", ["forget"]:
                return httpx.Response(200, json={"forgotten": self._forget(tenant, body)})
            case "POST", ["ingest"]:
                return httpx.Response(202, json={"job_id": self._ingest(tenant, body)})
            case "GET", ["jobs", job_id]:
                return httpx.Response(200, json=self._poll(tenant, job_id))
            case "GET", ["stats"]:
                return httpx.Response(200, json=self._stats(tenant))
            case "GET", ["activity"]:
                mine = [a for a in self.activity if a["_tenant"] == tenant]
                return httpx.Response(200, json={"data": [{k: v for k, v in a.items() if k != "_tenant"}
                                                          for a in mine], "next_cursor": None})
            case "GET", ["export"]:
                lines = [orjson.dumps(self._public(r)) for r in self._matching(tenant, params, "all")]
                return httpx.Response(200, content=b"\n".join(lines) + b"\n",
                                      headers={"Content-Type": "application/x-ndjson"})
            case "POST", ["import"]:
                return httpx.Response(200, json=self._import(tenant, body))
        raise _Refusal(404, "not_found", f"no route {method} {path}")

    # ------------------------------------------------------------------ records

    @staticmethod
    def _fields(body: Any, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _Refusal(400, "invalid_request", "the body must be an object")
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise _Refusal(400, "invalid_request", f"unknown fields: {', '.join(unknown)}")
        return body

    def _status(self, record: dict[str, Any]) -> str:
        if record.get("superseded_by"):
            return "superseded"
        expires = record.get("expires_at")
        if expires and _when(expires, "expires_at") <= self.now():
            return "expired"
        return "active"

    def _public(self, record: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in record.items() if not k.startswith("_")}
        out["status"] = self._status(record)
        return out

    def _own(self, tenant: str, rid: str) -> dict[str, Any]:
        record = self.records.get(rid)
        if record is None or record["_tenant"] != tenant:
            raise _Refusal(404, "not_found", "no such record")
        return record

    def _checked(self, fields: dict[str, Any]) -> None:
        if not isinstance(fields.get("content"), str) or not fields["content"].strip():
            raise _Refusal(400, "invalid_request", "content is required")
        if fields.get("kind") not in ("semantic", "episodic", "procedural"):
            raise _Refusal(400, "invalid_request", "kind must be semantic, episodic or procedural")
        if fields.get("tier", "contextual") not in _TIER_ORDER:
            raise _Refusal(400, "invalid_request", "tier must be core, contextual or archival")
        importance = fields.get("importance", 0.5)
        if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0 <= importance <= 1:
            raise _Refusal(400, "invalid_request", "importance must be from 0 to 1")
        if fields.get("expires_at") is not None:
            _when(fields["expires_at"], "expires_at")

    def _charge(self, tenant: str, texts: list[str], new_records: int) -> None:
        """The limits, checked before anything is written: the cap, then the token quota."""
        held = sum(1 for r in self.records.values() if r["_tenant"] == tenant)
        if held + new_records > self.cap:
            raise _Refusal(409, "record_cap_exceeded", f"the tenant holds {held} of its {self.cap} records")
        if self.embedding and self.token_quota is not None:
            cost = sum(len(words(t)) for t in texts)
            if self.tokens_used.get(tenant, 0) + cost > self.token_quota:
                raise _Refusal(402, "token_quota_exceeded", "the store would exceed the token quota")
            self.tokens_used[tenant] = self.tokens_used.get(tenant, 0) + cost

    def _store(self, tenant: str, fields: dict[str, Any], *, supersedes: str | None = None,
               record_id: str | None = None) -> dict[str, Any]:
        fields = {"tier": "contextual", "importance": 0.5, **fields}
        self._checked(fields)
        self._charge(tenant, [fields["content"]], 1)
        at = _iso(self.now())
        record = {f: fields.get(f) for f in _STORE_FIELDS}
        self._made += 1
        made_id = record_id or f"mrec_{self._made:012d}"
        record.update(id=made_id, supersedes=supersedes, superseded_by=None,
                      created_at=fields.get("created_at") or at, updated_at=at, _tenant=tenant,
                      _vector=embed(fields["content"]) if self.embedding else None)
        record["metadata"] = record["metadata"] or {}
        self.records[made_id] = record
        self._log(tenant, "stored", made_id)
        return record

    def _patch(self, tenant: str, rid: str, body: Any) -> dict[str, Any]:
        record = self._own(tenant, rid)
        fields = self._fields(body, _PATCH_FIELDS)
        self._checked({**record, **fields})
        if "content" in fields and fields["content"] != record["content"]:
            self._charge(tenant, [fields["content"]], 0)
            record["_vector"] = embed(fields["content"]) if self.embedding else None
        record.update(fields, updated_at=_iso(self.now()))
        self._log(tenant, "updated", rid)
        return record

    def _supersede(self, tenant: str, rid: str, body: Any) -> dict[str, Any]:
        old = self._own(tenant, rid)
        if old.get("superseded_by"):
            raise _Refusal(409, "conflict", "the record is already superseded")
        fields = self._fields(body, _STORE_FIELDS)
        inherited = {f: old[f] for f in _STORE_FIELDS if f not in fields and f not in ("content", "metadata")}
        new = self._store(tenant, {**inherited, **fields}, supersedes=rid)
        old.update(superseded_by=new["id"], updated_at=new["created_at"])
        self._log(tenant, "superseded", rid)
        return new

    def _log(self, tenant: str, action: str, rid: str) -> None:
        self.activity.append({"at": _iso(self.now()), "action": action, "record_id": rid, "_tenant": tenant})

    def _matching(self, tenant: str, params: dict[str, Any], status: str) -> list[dict[str, Any]]:
        """A listing's records: every filter named is an exact match."""
        out = []
        for record in self.records.values():
            if record["_tenant"] != tenant:
                continue
            if any(params.get(f) is not None and record.get(f) != params[f]
                   for f in ("actor_id", "app_id", "scope_id", "kind", "tier", "category")):
                continue
            if status != "all" and self._status(record) != status:
                continue
            out.append(record)
        return sorted(out, key=lambda r: (r["created_at"], r["id"]))

    def _list(self, tenant: str, params: dict[str, str]) -> dict[str, Any]:
        unknown = set(params) - _LIST_PARAMS
        if unknown:
            raise _Refusal(400, "invalid_request", f"unknown parameters: {', '.join(sorted(unknown))}")
        status = params.get("status", "active")
        if status not in ("active", "superseded", "expired", "all"):
            raise _Refusal(400, "invalid_request", "bad status")
        limit = int(params.get("limit", 50))
        if not 1 <= limit <= 100:
            raise _Refusal(400, "invalid_request", "limit must be from 1 to 100")
        rows = self._matching(tenant, params, status)
        start = int(params.get("cursor", 0))
        page = rows[start : start + limit]
        following = str(start + limit) if start + limit < len(rows) else None
        return {"data": [self._public(r) for r in page], "next_cursor": following}

    # ------------------------------------------------------------------ recall

    def _visible(self, record: dict[str, Any], ask: dict[str, Any]) -> bool:
        actor = ask.get("actor_id")
        if actor is not None and record.get("actor_id") not in (actor, None):
            return False  # another actor's private record: never, by any list
        if any(ask.get(f) is not None and record.get(f) != ask[f]
               for f in ("app_id", "scope_id", "kind", "tier", "category")):
            return False
        status = self._status(record)
        return not ((status == "superseded" and not ask.get("include_superseded"))
                    or (status == "expired" and not ask.get("include_expired")))

    def _recall(self, tenant: str, ask: dict[str, Any]) -> dict[str, Any]:
        limit = ask.get("limit", 10)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise _Refusal(400, "invalid_request", "limit must be from 1 to 100")
        pool = [r for r in self.records.values() if r["_tenant"] == tenant and self._visible(r, ask)]
        query = ask.get("query")
        if not query:
            now = self.now()
            pool.sort(key=lambda r: (_TIER_ORDER[r["tier"]], -r["importance"], -self._recency(r, now), r["id"]))
            return {"results": [{"record": self._public(r), "score": 1.0} for r in pool[:limit]],
                    "embedding": self.embedding}
        asked = set(words(query))
        lexical: list[tuple[int, dict[str, Any]]] = []
        for record in pool:
            shared = len(asked & set(words(record["content"])))
            if shared:
                lexical.append((shared, record))
        lexical.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        vector: list[tuple[float, dict[str, Any]]] = []
        if self.embedding:
            question = embed(query)
            for record in pool:
                # Re-checked against the same filter (the documented privacy rule): `pool` is filtered.
                similarity = cosine(question, record["_vector"] or embed(record["content"]))
                if similarity >= VECTOR_FLOOR:
                    vector.append((similarity, record))
            vector.sort(key=lambda pair: (-pair[0], pair[1]["id"]))
        lex_rank = {r["id"]: i for i, (_, r) in enumerate(lexical, start=1)}
        vec_rank = {r["id"]: i for i, (_, r) in enumerate(vector, start=1)}
        similarity_of = {r["id"]: s for s, r in vector}
        shared_of = {r["id"]: n for n, r in lexical}
        now = self.now()
        scored = []
        for rid in lex_rank.keys() | vec_rank.keys():
            record = self.records[rid]
            strong = shared_of.get(rid, 0) == len(asked) or similarity_of.get(rid, 0.0) >= 0.6
            if record["tier"] == "archival" and not strong:
                continue
            fused = sum(1 / (60 + ranks[rid]) for ranks in (lex_rank, vec_rank) if rid in ranks)
            weight = (0.5 + 0.5 * record["importance"]) * (0.5 + 0.5 * self._recency(record, now))
            scored.append((fused * weight * _TIER_WEIGHT[record["tier"]], rid))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        results = []
        for score, rid in scored[:limit]:
            item: dict[str, Any] = {"record": self._public(self.records[rid]), "score": round(score, 9)}
            if rid in lex_rank:
                item["lexical_rank"] = lex_rank[rid]
            if rid in vec_rank:
                item["vector_rank"] = vec_rank[rid]
            results.append(item)
        return {"results": results, "embedding": self.embedding}

    @staticmethod
    def _recency(record: dict[str, Any], now: datetime) -> float:
        age = (now - _when(record["created_at"], "created_at")).total_seconds() / 86400
        return float(0.5 ** (max(0.0, age) / 30))

    # ------------------------------------------------------------------ forget

    def _forget(self, tenant: str, body: Any) -> int:
        if not isinstance(body, dict):
            raise _Refusal(400, "invalid_request", "the body must be an object")
        if "ids" in body:
            if set(body) != {"ids"} or not isinstance(body["ids"], list):
                raise _Refusal(400, "invalid_request", "forget by ids takes `ids` alone")
            if not body["ids"]:
                raise _Refusal(400, "empty_selector", "an empty selector is rejected")
            doomed = [i for i in body["ids"] if i in self.records and self.records[i]["_tenant"] == tenant]
        else:
            unknown = set(body) - set(_SELECTOR)
            if unknown:
                raise _Refusal(400, "invalid_request", f"unknown selector fields: {', '.join(sorted(unknown))}")
            selector = {k: v for k, v in body.items() if v not in (None, "")}
            if not selector:
                raise _Refusal(400, "empty_selector", "an empty selector is rejected")
            before = _when(selector.pop("before"), "before") if "before" in selector else None
            doomed = [rid for rid, r in self.records.items() if r["_tenant"] == tenant
                      and all(r.get(k) == v for k, v in selector.items())
                      and (before is None or _when(r["created_at"], "created_at") < before)]
        for rid in doomed:
            del self.records[rid]
            self._log(tenant, "forgotten", rid)
        return len(doomed)

    # ------------------------------------------------------------------ ingest, stats, import

    def _ingest(self, tenant: str, body: Any) -> str:
        fields = self._fields(body, {"transcript", "mode", "actor_id", "app_id", "scope_id", "session_id"})
        if fields.get("mode") not in ("smart", "raw") or not str(fields.get("transcript", "")).strip():
            raise _Refusal(400, "invalid_request", "ingest needs a transcript and a mode of smart or raw")
        self._made += 1
        job_id = f"job_{self._made:012d}"
        self.jobs[job_id] = {"id": job_id, "status": "queued", "record_ids": [], "_tenant": tenant, "_ask": fields}
        return job_id

    def _poll(self, tenant: str, job_id: str) -> dict[str, Any]:
        job = self.jobs.get(job_id)
        if job is None or job["_tenant"] != tenant:
            raise _Refusal(404, "not_found", "no such job")
        if job["status"] == "queued":
            job["status"] = "running"
        elif job["status"] == "running":
            self._run(tenant, job)
        return {k: v for k, v in job.items() if not k.startswith("_")}

    def _run(self, tenant: str, job: dict[str, Any]) -> None:
        ask = job["_ask"]
        scope = {k: ask[k] for k in ("actor_id", "app_id", "scope_id", "session_id") if ask.get(k) is not None}
        transcript = str(ask["transcript"])
        if ask["mode"] == "raw":
            statements = [(transcript, "episodic")]
        else:
            sentences = (s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", transcript))
            statements = [(s, "semantic") for s in sentences if len(words(s)) >= 4 and not s.endswith("?")]
        try:
            self._charge(tenant, [s for s, _ in statements], len(statements))
        except _Refusal as refusal:
            job.update(status="failed", error={"code": refusal.code, "message": refusal.message})
            return
        if self.embedding and self.token_quota is not None:  # charged above for all of them at once
            self.tokens_used[tenant] -= sum(len(words(s)) for s, _ in statements)
        job["record_ids"] = [self._store(tenant, {**scope, "content": s, "kind": k})["id"] for s, k in statements]
        job["status"] = "done"

    def _stats(self, tenant: str) -> dict[str, Any]:
        mine = [r for r in self.records.values() if r["_tenant"] == tenant]
        by_kind: dict[str, int] = {}
        by_tier: dict[str, int] = {}
        for r in mine:
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
            by_tier[r["tier"]] = by_tier.get(r["tier"], 0) + 1
        return {"records": len(mine), "cap": self.cap, "by_kind": by_kind, "by_tier": by_tier,
                "tokens_used": self.tokens_used.get(tenant, 0), "token_quota": self.token_quota}

    def _import(self, tenant: str, body: Any) -> dict[str, Any]:
        imported, skipped, errors = 0, 0, []
        for number, line in enumerate(str(body or "").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
                if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                    raise ValueError("not a record")
                if item["id"] in self.records:
                    skipped += 1
                    continue
                fields = {k: item.get(k) for k in _STORE_FIELDS if item.get(k) is not None}
                stored = self._store(tenant, {**fields, "created_at": item.get("created_at")},
                                     supersedes=item.get("supersedes"), record_id=item["id"])
                stored["superseded_by"] = item.get("superseded_by")
                imported += 1
            except (ValueError, _Refusal) as exc:
                errors.append({"line": number, "message": str(exc)})
        return {"imported": imported, "skipped": skipped, "errors": errors}


def later(start: datetime, **delta: float) -> Callable[[], datetime]:
    """A clock fixed at `start` plus `delta`, for tests of recency."""
    moment = start + timedelta(**delta)
    return lambda: moment


@asynccontextmanager
async def saas_provider(fake: FakeSaas | None = None, **options: Any) -> AsyncIterator[Any]:
    """A `SaasProvider` over `fake` (a fresh one by default), through an httpx client on its transport."""
    from adapters.saas import SaasProvider

    fake = fake or FakeSaas()
    async with fake.client() as client:
        yield SaasProvider(client, base_url=BASE_URL, api_key=KEY, **{"ingest_poll": 0, **options})
