"""mem0's two HTTP dialects, and the one place a mem0 answer becomes a value or a ProviderError.

The hosted Platform (`Authorization: Token`, `/v1` and `/v3` paths ending in a slash) and the self-hosted
OSS REST server (`X-API-Key`, bare paths that do not match with a trailing slash) do the same things with
different paths, auth and bodies. Each dialect below says only how; `Mem0Provider` says what, once.
Wire facts: shared/vendors/mem0.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from adapters import vendor_http
from adapters.mem0 import _turns as turns
from adapters.vendor_http import ABSENT as ABSENT
from adapters.vendor_http import Secret as Secret

T = TypeVar("T")

log = logging.getLogger("memfed.adapters.mem0")

# Both variants cap one search at 1000 results (Platform: `top_k` maximum; OSS: no cap, the same bound
# keeps one answer a sane size). The OSS server caps one listing at 1000 (`top_k` le=1000 in
# server/main.py) and has no offset, so a listing that comes back full cannot be proven complete.
SEARCH_CAP = 1000
OSS_LIST_CAP = 1000
PLATFORM_PAGE_SIZE = 200  # the v3 list's maximum page_size
PLATFORM_MAX_PAGES = 10_000  # a guard against a `next` link that never ends


@dataclass(frozen=True)
class Call(vendor_http.Request):
    changes: bool = False  # it adds, updates or deletes at mem0 (see `Dialect.changes_one_at_a_time`)


class ListTooLong(Exception):
    """The OSS server returned as many memories as it can list: more may exist and cannot be reached."""


def _results(body: Any) -> list[Mapping[str, Any]]:
    """The `results` array of a search, list or add answer (a bare array is accepted too)."""
    items = body.get("results") if isinstance(body, Mapping) else body
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise ValueError("no results array")
    return items


def _one_message(text: str) -> list[dict[str, str]]:
    # Always the `user` role: with infer false the OSS server skips `system` messages, and a part's own
    # role is kept in memfed's metadata, not in mem0's.
    return [{"role": "user", "content": text}]


class Dialect:
    """How one mem0 variant spells each operation. Subclasses fill in paths, auth and body shapes."""

    name = ""
    searches_many_memories = False
    # A server whose store breaks under concurrent changes: every changing call to it waits its turn.
    changes_one_at_a_time = False

    def auth_headers(self, key: Secret) -> dict[str, str]:
        raise NotImplementedError

    def add(self, entity: str, text: str, metadata: Mapping[str, Any]) -> Call:
        raise NotImplementedError

    def get(self, vendor_id: str) -> Call:
        raise NotImplementedError

    def update(self, vendor_id: str, text: str, metadata: Mapping[str, Any]) -> Call:
        raise NotImplementedError

    def delete(self, vendor_id: str) -> Call:
        raise NotImplementedError

    def history(self, vendor_id: str) -> Call:
        raise NotImplementedError

    def delete_all(self, entity: str) -> Call:
        raise NotImplementedError

    def search(self, entities: Sequence[str], query: str, top_k: int) -> Call:
        raise NotImplementedError

    def list_page(self, entity: str, page: int) -> Call:
        raise NotImplementedError

    def list_many_page(self, entities: Sequence[str], page: int) -> Call:
        """One page of the memories of several entities at once (where `searches_many_memories`)."""
        raise NotImplementedError

    def entities(self) -> Call:
        """Every entity the server holds memories of, each with how many (OSS only)."""
        raise NotImplementedError

    def ping(self, entity: str) -> Call:
        """The cheapest call that proves the server answers and takes memfed's key."""
        raise NotImplementedError

    def page_items(self, body: Any) -> tuple[list[Mapping[str, Any]], bool]:
        """The memories of one listing answer, and whether another page follows."""
        raise NotImplementedError

    def added_id(self, body: Any) -> str:
        """The id mem0 gave the one memory an add stored."""
        items = _results(body)
        if len(items) != 1 or not isinstance(items[0].get("id"), str):
            raise ValueError(f"an add stored {len(items)} memories, expected one")
        return str(items[0]["id"])

    def search_items(self, body: Any) -> list[Mapping[str, Any]]:
        return _results(body)


class PlatformDialect(Dialect):
    name = "platform"
    # v3 search takes an OR of entity ids inside `filters`, so one call answers many memories.
    searches_many_memories = True

    def auth_headers(self, key: Secret) -> dict[str, str]:
        return {"Authorization": f"Token {key.reveal()}"}

    def add(self, entity: str, text: str, metadata: Mapping[str, Any]) -> Call:
        body = {"messages": _one_message(text), "user_id": entity, "metadata": dict(metadata), "infer": False}
        return Call("POST", "/v3/memories/add/", json=body, changes=True)

    def added_id(self, body: Any) -> str:
        if isinstance(body, Mapping) and "results" not in body and body.get("status") == "PENDING":
            # Only an inferred add is queued; a stated one answers with its memory. If the Platform ever
            # queues it, the record exists without an id memfed can name: say so rather than guess.
            raise ValueError("the Platform queued a stated write instead of storing it")
        return super().added_id(body)

    def get(self, vendor_id: str) -> Call:
        return Call("GET", f"/v1/memories/{vendor_id}/")

    def update(self, vendor_id: str, text: str, metadata: Mapping[str, Any]) -> Call:
        return Call("PUT", f"/v1/memories/{vendor_id}/", json={"text": text, "metadata": dict(metadata)}, changes=True)

    def delete(self, vendor_id: str) -> Call:
        return Call("DELETE", f"/v1/memories/{vendor_id}/", changes=True)

    def history(self, vendor_id: str) -> Call:
        return Call("GET", f"/v1/memories/{vendor_id}/history/")

    def delete_all(self, entity: str) -> Call:
        return Call("DELETE", "/v1/memories/", params={"user_id": entity}, changes=True)

    def search(self, entities: Sequence[str], query: str, top_k: int) -> Call:
        filters: dict[str, Any] = (
            {"user_id": entities[0]} if len(entities) == 1 else {"OR": [{"user_id": e} for e in entities]}
        )
        # threshold 0: the gateway ranks across providers itself and must see the weak matches too.
        body = {"query": query, "filters": filters, "top_k": top_k, "threshold": 0}
        return Call("POST", "/v3/memories/search/", json=body)

    def ping(self, entity: str) -> Call:
        return Call("GET", "/v1/ping/")

    def list_page(self, entity: str, page: int) -> Call:
        return Call(
            "POST",
            "/v3/memories/",
            params={"page": page, "page_size": PLATFORM_PAGE_SIZE},
            json={"filters": {"user_id": entity}},
        )

    def list_many_page(self, entities: Sequence[str], page: int) -> Call:
        return Call(
            "POST",
            "/v3/memories/",
            params={"page": page, "page_size": PLATFORM_PAGE_SIZE},
            json={"filters": {"OR": [{"user_id": e} for e in entities]}},
        )

    def page_items(self, body: Any) -> tuple[list[Mapping[str, Any]], bool]:
        if not isinstance(body, Mapping):
            raise ValueError("a listing is not an object")
        return _results(body), body.get("next") is not None


class OssDialect(Dialect):
    name = "oss"
    # The OSS library refuses an OR of two user_ids, so each memory is searched by its own call.
    searches_many_memories = False
    # Observed on mem0ai 2.2.1 with faiss: two changes at once fail with 502 (one of them applied
    # anyway) and leave the index corrupt, so that a search no longer finds a memory by its own text.
    changes_one_at_a_time = True

    def auth_headers(self, key: Secret) -> dict[str, str]:
        # A server run with AUTH_DISABLED takes no key; a missing key is then not an error.
        return {"X-API-Key": key.reveal()} if key else {}

    def add(self, entity: str, text: str, metadata: Mapping[str, Any]) -> Call:
        body = {"messages": _one_message(text), "user_id": entity, "metadata": dict(metadata), "infer": False}
        return Call("POST", "/memories", json=body, changes=True)

    def get(self, vendor_id: str) -> Call:
        return Call("GET", f"/memories/{vendor_id}")

    def update(self, vendor_id: str, text: str, metadata: Mapping[str, Any]) -> Call:
        return Call("PUT", f"/memories/{vendor_id}", json={"text": text, "metadata": dict(metadata)}, changes=True)

    def delete(self, vendor_id: str) -> Call:
        return Call("DELETE", f"/memories/{vendor_id}", changes=True)

    def history(self, vendor_id: str) -> Call:
        return Call("GET", f"/memories/{vendor_id}/history")

    def delete_all(self, entity: str) -> Call:
        return Call("DELETE", "/memories", params={"user_id": entity}, changes=True)

    def search(self, entities: Sequence[str], query: str, top_k: int) -> Call:
        if len(entities) != 1:
            raise ValueError("the OSS server searches one entity per call")
        body = {"query": query, "filters": {"user_id": entities[0]}, "top_k": top_k, "threshold": 0}
        return Call("POST", "/search", json=body)

    def list_page(self, entity: str, page: int) -> Call:
        # The server's default top_k is 20 and truncates silently: always ask for its maximum.
        return Call("GET", "/memories", params={"user_id": entity, "top_k": OSS_LIST_CAP})

    def entities(self) -> Call:
        return Call("GET", "/entities")

    def ping(self, entity: str) -> Call:
        return Call("GET", "/memories", params={"user_id": entity, "top_k": 1})

    def page_items(self, body: Any) -> tuple[list[Mapping[str, Any]], bool]:
        items = _results(body)
        if len(items) >= OSS_LIST_CAP:
            raise ListTooLong
        return items, False


DIALECTS: dict[str, Dialect] = {"platform": PlatformDialect(), "oss": OssDialect()}


class Wire:
    """Sends one dialect's calls through the injected client and maps every failure at this boundary."""

    def __init__(
        self, client: httpx.AsyncClient, *, base_url: str, key: Secret, dialect: Dialect, timeout: float
    ) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._key = key
        self.dialect = dialect
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"<mem0 wire {self.dialect.name} {self._base}>"

    async def send(self, call: Call, *, absent_ok: bool = False) -> Any:
        """The decoded JSON answer (None for an empty body); `ABSENT` for a 404 when `absent_ok`. A
        changing call to a server that takes changes one at a time waits its turn (`one_change`)."""
        if call.changes and self.dialect.changes_one_at_a_time:
            return await self.one_change(lambda: self.exchange(call, absent_ok=absent_ok))
        return await self.exchange(call, absent_ok=absent_ok)

    async def one_change(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` (calls made with `exchange`) in this server's turn (`adapters.mem0._turns`)."""
        return await turns.one_at_a_time(self._base, work)

    async def exchange(self, call: Call, *, absent_ok: bool = False) -> Any:
        """One request and its answer, mapped (adapters.vendor_http); no turn is taken (see `send`)."""
        what = f"{call.method} {call.path}"
        started = time.perf_counter()
        response = await vendor_http.request(self._client, "mem0", call.method, self._base + call.path, what=what,
                                             headers=self.dialect.auth_headers(self._key), within=self._timeout,
                                             key=self._key, params=call.params, json=call.json)
        status = response.status_code
        log.debug("mem0 %s -> %d in %.0f ms", what, status, (time.perf_counter() - started) * 1000)
        if status == 404 and absent_ok:
            return ABSENT
        if not 200 <= status < 300:
            raise vendor_http.failure("mem0", what, response, self._detail(response))
        return vendor_http.decoded("mem0", what, response.content)

    def _detail(self, response: httpx.Response) -> str:
        try:
            text = response.text
        except (UnicodeDecodeError, httpx.HTTPError):  # a body we cannot even decode says nothing useful
            return "unreadable body"
        return vendor_http.redacted(text, self._key)
