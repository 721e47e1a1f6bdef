"""An app served by uvicorn on a loopback port inside the test's own event loop, lifespan included.

For tests that need real HTTP (an MCP client speaks it) but want the gateway's in-process fixtures
(its services, members and keys) at hand. The socket is bound before uvicorn starts, so the port is
never raced for.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn


class LoopbackServer:
    """`async with LoopbackServer(app) as server:` serves `app` at `server.url` until the block ends."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopbackServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="on", log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise RuntimeError("uvicorn stopped before it started (see the lifespan's log)")
            await asyncio.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await self._task
