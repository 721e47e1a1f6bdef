"""The SaaS Memory API's HTTP wire, and the one place an answer of it becomes a value or a ProviderError.

The vendor documents behaviour, not a wire (shared/spec/saas-memory-api.txt); shared/vendors/saas-memory.md
fixes the wire memfed speaks, every name the documentation does not give marked *inferred*. Every path,
field name and error code of it is in this module, so that when the vendor publishes its API this file is
the one that changes. The rest of the package speaks in `Call`s built here and in the field names below.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import orjson

from adapters import clock, vendor_http
from adapters.base import ProviderRejected, ProviderUnavailable, RecordLimit, Unsupported
from adapters.vendor_http import ABSENT as ABSENT
from adapters.vendor_http import Secret as Secret

log = logging.getLogger("memfed.adapters.saas")
VENDOR = "the SaaS memory API"  # as its failures name it

# --------------------------------------------------------------------------- vocabulary (documented)

TIERS = ("core", "contextual", "archival")
DEFAULT_TIER = "contextual"  # the documentation: "contextual is the default"
JOB_DONE, JOB_FAILED = "done", "failed"
JOB_STATES = ("queued", "running", JOB_DONE, JOB_FAILED)

# --------------------------------------------------------------------------- field names (inferred)

# A Record: {id, content, kind, tier, importance, category, actor_id, app_id, scope_id, agent_id,
# session_id, metadata, status, supersedes, superseded_by, expires_at, created_at, updated_at}
F_ID, F_CONTENT, F_KIND, F_TIER, F_IMPORTANCE, F_CATEGORY = "id", "content", "kind", "tier", "importance", "category"
F_ACTOR, F_APP, F_SCOPE, F_SESSION = "actor_id", "app_id", "scope_id", "session_id"
F_METADATA, F_STATUS, F_SUPERSEDES, F_SUPERSEDED_BY = "metadata", "status", "supersedes", "superseded_by"
F_EXPIRES, F_CREATED, F_UPDATED = "expires_at", "created_at", "updated_at"

RECALL_LIMIT = 100  # the documented 1..100 of one recall
EXPORT_MAX_LINES = 1_000_000  # a guard against an export that never ends

# The vendor's ids travel in paths: held to a plain alphabet, so no id can change the path it is put in.
VENDOR_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")

# --------------------------------------------------------------------------- error codes (inferred)

E_EMPTY_SELECTOR = "empty_selector"
E_RECORD_CAP = "record_cap_exceeded"
E_CONFLICT = "conflict"  # a supersede of a record another call superseded first
E_TOKEN_QUOTA = "token_quota_exceeded"  # noqa: S105 - an error code, not a secret


class RecordCapExceeded(RecordLimit):
    """The tenant's record cap: the vendor refused the write (nothing was evicted, nothing stored)."""

    reason = "record_cap_exceeded"


class TokenQuotaExceeded(Unsupported):
    """The tenant's token quota: the vendor refused the write before storing anything."""

    reason = "token_quota_exceeded"


class EmptySelector(ProviderRejected):
    """A bulk forget with nothing to select by: memfed refuses to build one (and the vendor too)."""


class Superseded(ProviderRejected):
    """The record was superseded by another call between memfed's read and its supersede."""


@dataclass(frozen=True)
class Call(vendor_http.Request):
    idempotency_key: str | None = None
    ndjson: bool = False  # the answer is NDJSON (export)


# --------------------------------------------------------------------------- the calls


def store(fields: Mapping[str, Any], *, idempotency_key: str | None) -> Call:
    return Call("POST", "/records", json=dict(fields), idempotency_key=idempotency_key)


def get(vendor_id: str) -> Call:
    return Call("GET", f"/records/{_path_id(vendor_id)}")


def correct(vendor_id: str, fields: Mapping[str, Any], *, idempotency_key: str | None) -> Call:
    """Correct in place (PATCH): same id, `updated_at` moves. memfed uses it only for its own metadata."""
    return Call("PATCH", f"/records/{_path_id(vendor_id)}", json=dict(fields), idempotency_key=idempotency_key)


def supersede(vendor_id: str, fields: Mapping[str, Any], *, idempotency_key: str | None) -> Call:
    return Call("POST", f"/records/{_path_id(vendor_id)}/supersede", json=dict(fields),
                idempotency_key=idempotency_key)


def recall(scope: Mapping[str, str], *, query: str | None, limit: int, kind: str | None = None,
           tier: str | None = None, category: str | None = None, include_hidden: bool = False) -> Call:
    body: dict[str, Any] = {**scope, "limit": max(1, min(RECALL_LIMIT, limit))}
    if query:
        body["query"] = query
    for key, value in (("kind", kind), ("tier", tier), ("category", category)):
        if value is not None:
            body[key] = value
    if include_hidden:
        body["include_superseded"] = body["include_expired"] = True
    return Call("POST", "/recall", json=body)


def forget_ids(vendor_ids: Sequence[str]) -> Call:
    if not vendor_ids:
        raise EmptySelector("a forget by ids needs at least one id")
    return Call("POST", "/forget", json={"ids": [_path_id(v) for v in vendor_ids]})


def forget_scope(scope: Mapping[str, str]) -> Call:
    """The only bulk forget memfed sends: every record of one memory's scope. Built only with a non-empty
    `scope_id` (and the same `actor_id`), so it can never select a whole tenant, an app, or nothing."""
    scope_id, actor_id = scope.get(F_SCOPE), scope.get(F_ACTOR)
    if not scope_id or not actor_id or not scope.get(F_APP):
        raise EmptySelector("a bulk forget must name one memory's scope_id, actor_id and app_id")
    return Call("POST", "/forget", json={F_SCOPE: scope_id, F_ACTOR: actor_id, F_APP: scope[F_APP]})


def ingest(transcript: str, mode: Literal["smart", "raw"], scope: Mapping[str, str], *,
           session_id: str | None, idempotency_key: str | None) -> Call:
    body: dict[str, Any] = {"transcript": transcript, "mode": mode, **scope}
    if session_id is not None:
        body[F_SESSION] = session_id
    return Call("POST", "/ingest", json=body, idempotency_key=idempotency_key)


def job(job_id: str) -> Call:
    return Call("GET", f"/jobs/{_path_id(job_id)}")


def stats() -> Call:
    return Call("GET", "/stats")


def export(scope: Mapping[str, str]) -> Call:
    return Call("GET", "/export", params=dict(scope), ndjson=True)


def _path_id(value: str) -> str:
    if not VENDOR_ID.fullmatch(value):
        raise ProviderRejected("an id the SaaS memory API cannot name")
    return value


# --------------------------------------------------------------------------- reading answers


@dataclass(frozen=True)
class Recalled:
    record: Mapping[str, Any]
    score: float
    lexical_rank: int | None
    vector_rank: int | None


def recalled(body: Any) -> tuple[list[Recalled], bool]:
    """The results of a recall, best first, and whether the vector list took part (`embedding`)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("results"), list):
        raise ProviderUnavailable("the SaaS memory API answered a recall without `results`")
    out: list[Recalled] = []
    for item in body["results"]:
        if not isinstance(item, Mapping) or not isinstance(item.get("record"), Mapping):
            raise ProviderUnavailable("the SaaS memory API recalled something that is not a record")
        score = item.get("score")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ProviderUnavailable("the SaaS memory API recalled a record without a score")
        out.append(Recalled(item["record"], float(score), _rank(item.get("lexical_rank")),
                            _rank(item.get("vector_rank"))))
    return out, body.get("embedding") is True


def _rank(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def job_id_of(body: Any) -> str:
    if not isinstance(body, Mapping) or not isinstance(body.get("job_id"), str):
        raise ProviderUnavailable("the SaaS memory API queued an ingest without a job id")
    return str(body["job_id"])


def job_state(body: Any) -> tuple[str, list[str]]:
    """A job's status and the ids of the records it made."""
    if not isinstance(body, Mapping) or body.get("status") not in JOB_STATES:
        raise ProviderUnavailable("the SaaS memory API answered a job in a shape memfed cannot read")
    ids = body.get("record_ids") or []
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ProviderUnavailable("the SaaS memory API answered a job whose record ids are not strings")
    return str(body["status"]), list(ids)


parse_time = clock.parse  # the vendor's ISO 8601 times; one without a zone is UTC


def format_time(value: datetime) -> str:
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).astimezone(UTC).isoformat()


# --------------------------------------------------------------------------- sending


class Wire:
    """Sends calls through the injected client and maps every failure at this boundary."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, key: Secret, timeout: float) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._key = key
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"<saas memory wire {self._base}>"

    async def send(self, call: Call, *, absent_ok: bool = False) -> Any:
        """The decoded JSON answer (a list of objects for NDJSON); `ABSENT` for a 404 when `absent_ok`."""
        what = f"{call.method} {call.path}"
        headers = {"Authorization": f"Bearer {self._key.reveal()}"}
        if call.idempotency_key is not None:
            headers["Idempotency-Key"] = call.idempotency_key
        response = await vendor_http.request(self._client, VENDOR, call.method, self._base + call.path, what=what,
                                             headers=headers, within=self._timeout, key=self._key,
                                             params=call.params, json=call.json)
        status = response.status_code
        if status == 404 and absent_ok:
            return ABSENT
        if not 200 <= status < 300:
            raise self._failure(what, response)
        if call.ndjson:
            return _ndjson(response.content)
        return vendor_http.decoded(VENDOR, what, response.content)

    def _failure(self, what: str, response: httpx.Response) -> Exception:
        status, (code, message) = response.status_code, self._error(response)
        said = f"{code}: {message}" if message else code
        if status in (401, 403, 429):
            return vendor_http.failure(VENDOR, what, response, said)
        if code == E_RECORD_CAP:
            return RecordCapExceeded(f"the SaaS memory API refused the write: record_cap_exceeded (the tenant's "
                                     f"record cap is reached; nothing was stored or evicted): {message}")
        if code == E_TOKEN_QUOTA:
            return TokenQuotaExceeded(f"the SaaS memory API refused the write: token_quota_exceeded (the "
                                      f"tenant's token quota is spent; nothing was stored): {message}")
        if status == 409 and code == E_CONFLICT:
            return Superseded(f"the SaaS memory API refused {what}: the record was superseded meanwhile")
        if code == E_EMPTY_SELECTOR:
            return EmptySelector(f"the SaaS memory API refused a forget without a selector ({said})")
        return vendor_http.failure(VENDOR, what, response, said)

    def _error(self, response: httpx.Response) -> tuple[str, str]:
        """The `{"error": {"code", "message"}}` of a failure, redacted and cut short."""
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return "unknown", ""
        error = body.get("error") if isinstance(body, Mapping) else None
        if not isinstance(error, Mapping):
            return "unknown", ""
        code = error.get("code")
        message = error.get("message")
        return (str(code) if isinstance(code, str) else "unknown",
                vendor_http.redacted(message, self._key) if isinstance(message, str) else "")


def _ndjson(content: bytes) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        if number > EXPORT_MAX_LINES:
            raise ProviderUnavailable("the SaaS memory API export did not end")
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ProviderUnavailable(f"line {number} of the SaaS memory export is not JSON") from exc
        if not isinstance(item, Mapping):
            raise ProviderUnavailable(f"line {number} of the SaaS memory export is not a record")
        out.append(item)
    return out


def job_failure(body: Any) -> Exception:
    """What a failed ingest job says: the vendor's limit errors as the refusals they are."""
    error = body.get("error") if isinstance(body, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    if code == E_RECORD_CAP:
        return RecordCapExceeded("the SaaS memory API refused the ingest: record_cap_exceeded (the tenant's "
                                 "record cap is reached; nothing was stored or evicted)")
    if code == E_TOKEN_QUOTA:
        return TokenQuotaExceeded("the SaaS memory API refused the ingest: token_quota_exceeded (nothing "
                                  "was stored)")
    return ProviderUnavailable(f"the SaaS memory API ingest job failed ({code or 'no reason given'})")
