"""The fake mem0 served over real HTTP, so a `memfed serve` process in another process reaches it."""

from __future__ import annotations

import inspect
from typing import Any

import httpx

from tests.adapters.fake_mem0 import FakeMem0


class FakeOverHttp:
    """The fake mem0 as an ASGI app, so a gateway in another process reaches it over HTTP."""

    def __init__(self, fake: FakeMem0) -> None:
        self.fake = fake

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        url = self.fake.base_url + scope["path"] + (f"?{query}" if query else "")
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"]]
        answer = self.fake.handle(httpx.Request(scope["method"], url, headers=headers, content=body))
        response: httpx.Response = await answer if inspect.isawaitable(answer) else answer
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": response.content})
