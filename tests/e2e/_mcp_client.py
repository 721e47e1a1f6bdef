"""The SDK's MCP client against a gateway served on loopback, and what the MCP tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway.server.app import endpoints
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.e2e._server import LoopbackServer

READ_TOOLS = {"memory_list", "memory_recall", "memory_graph", "memory_get"}
WRITE_TOOLS = {"memory_remember", "memory_revise", "memory_forget"}


def has_route(method: str, path: str) -> bool:
    return any(e.method == method and e.path == path for e in endpoints())


class Served:
    """The gateway, the URL it is served at, and a way to open an MCP session as any key."""

    def __init__(self, gw: Gateway, url: str) -> None:
        self.gw = gw
        self.url = url
        self.statuses: list[int] = []  # every HTTP status the MCP clients received, in order

    async def key_for(self, name: str, type_: str = "agent") -> tuple[str, str, str]:
        """A new member with one key: (member id, key id, secret)."""
        made = await self.gw.admin.post("/v1/members", json={"name": name, "type": type_})
        member_id = made.json()["id"]
        key = (await self.gw.admin.post(f"/v1/members/{member_id}/keys")).json()
        return member_id, key["id"], key["key"]

    def session(self, key: str, era: str = "handshake",
                path: str = "/mcp") -> AbstractAsyncContextManager[ClientSession]:
        return open_session(self.url, key, era, self.statuses, path=path)


@asynccontextmanager
async def open_session(url: str, key: str, era: str = "handshake", statuses: list[int] | None = None,
                       path: str = "/mcp") -> AsyncIterator[ClientSession]:
    """The SDK's client connected to `url` + `path` (/mcp, or /mcp?harness_id=…) with `key`: `handshake`
    opens with initialize, `modern` with server/discover (2026-07-28, where every request stands alone).
    Each HTTP status seen goes to `statuses`."""
    seen = statuses if statuses is not None else []

    async def record(response: httpx2.Response) -> None:
        seen.append(response.status_code)

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30.0,
                           event_hooks={"response": [record]}) as http,
        streamable_http_client(url + path, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        if era == "modern":
            await session.discover()
        else:
            await session.initialize()
        yield session


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Served]:
    """The gateway in-process on a fresh data dir, served on loopback (a test module's fixture wraps it)."""
    async with running_gateway(make_config(tmp_path)) as gw, LoopbackServer(gw.app) as server:
        yield Served(gw, server.url)


async def expected_tools(served: Served, holds: set[str]) -> set[str]:
    """The listing rule, read off the API's own documents, for a caller holding `holds` somewhere whose
    memories are all kept by the default provider and define no named query."""
    names = READ_TOOLS | (WRITE_TOOLS if "write" in holds else set())
    providers = (await served.gw.admin.get("/v1/memories/providers")).json()["data"]
    if any(p["queries"]["free"] for p in providers):
        names.add("memory_query")
    kinds = await served.gw.admin.get("/v1/memories/types")
    if kinds.status_code == 200 and any(op["requires"] in holds for kind in kinds.json()["data"]
                                        for op in kind["operations"]):
        names.add("memory_operate")
    return names


async def tool_names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> types.CallToolResult:
    return await session.call_tool(tool, arguments)


async def team(served: Served) -> dict[str, Any]:
    """A root with a shared branch, a reader and a writer on it, and a restricted branch neither holds."""
    gw = served.gw
    root = await gw.root("Company", description="What the company knows.")
    shared = await gw.child(gw.admin, root["id"], "Support", description="Support cases.")
    private = await gw.child(gw.admin, root["id"], "Board", restricted=True)
    reader_id, _, reader_key = await served.key_for("reader")
    writer_id, _, writer_key = await served.key_for("writer")
    await gw.grant(shared["id"], f"member:{reader_id}", "read")
    await gw.grant(shared["id"], f"member:{writer_id}", "read", "write")
    return {"root": root, "shared": shared, "private": private, "reader": (reader_id, reader_key),
            "writer": (writer_id, writer_key)}
