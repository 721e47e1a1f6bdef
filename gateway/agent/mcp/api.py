"""memfed's own HTTP API, called in-process on behalf of the agent that called a tool.

A tool does not reach into the gateway's internals: it makes the request the agent could have made
itself, with the agent's own bearer credential, through `httpx.ASGITransport` over the same app. So
every access rule, every audited decision and every error message is exactly the API's, and the
MCP side cannot drift from it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import httpx
import orjson

from gateway.identity.auth import Principal

log = logging.getLogger("memfed.mcp")

BASE_URL = "http://memfed.internal"


@dataclass(frozen=True)
class Caller:
    """Who called a tool, resolved from the bearer credential of the HTTP request that carried the call.

    It lives as long as that one request: nothing keeps it for the MCP session, so a revoked key or a
    changed group takes effect on the next call.
    """

    principal: Principal
    token: str
    request_id: str = ""  # sent on every API request a call makes, so the audit log ties them together
    harness_id: str | None = None  # the harness the MCP URL names (`/mcp?harness_id=`), if it names one

    def __repr__(self) -> str:  # the credential must never reach a log line
        return f"Caller({self.principal.principal})"


@dataclass(frozen=True)
class Answer:
    method: str
    path: str
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> dict[str, Any]:
        """The error envelope's inner object; a body that is not one is described, never echoed."""
        inner = self.body.get("error") if isinstance(self.body, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner
        return {"code": "memfed_unexpected_answer", "message": f"The API answered {self.status}.",
                "param": None, "detail": None}

    @property
    def route_missing(self) -> bool:
        return self.status == 404 and self.error.get("code") == "memfed_route_not_found"


class Api(Protocol):
    """What the tools need of the API: one request, as one caller. `LocalApi` is the real one."""

    async def call(self, caller: Caller, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                   body: Any = None) -> Answer: ...


def segment(value: str) -> str:
    """One path segment: ids are checked against the tools' id pattern, and quoted all the same."""
    return quote(value, safe="")


class LocalApi:
    """An HTTP client whose transport is the app itself; open while the app's lifespan runs."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._client: httpx.AsyncClient | None = None

    async def open(self) -> None:
        self._client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self._app), base_url=BASE_URL)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def call(self, caller: Caller, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                   body: Any = None) -> Answer:
        if self._client is None:
            raise RuntimeError("the in-process API client is not open")
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        response = await self._client.request(
            method, path, params=query or None,
            content=json.dumps(body).encode() if body is not None else None,
            headers={"authorization": f"Bearer {caller.token}",
                     **({"x-request-id": caller.request_id} if caller.request_id else {}),
                     **({"content-type": "application/json"} if body is not None else {})},
        )
        return Answer(method, path, response.status_code, _parsed(response.content, method, path))


def _parsed(content: bytes, method: str, path: str) -> Any:
    """The answer's JSON. The json module recurses, so a record nested deeper than the stack allows is
    parsed again with orjson, which does not (to 1024 levels); it is cut to size later (gateway/agent/mcp/depth.py)."""
    if not content:
        return None
    try:
        return json.loads(content)
    except RecursionError:
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            log.warning("the API answered %s %s with JSON nested too deep to read", method, path)
            return None
    except ValueError:
        log.warning("the API answered %s %s with a body that is not JSON", method, path)
        return None


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
