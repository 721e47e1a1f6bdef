"""Protocol versions: the `UHP-Version` header is honoured and every answer says which version it used."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.base.errors import bad_request

SUPPORTED_VERSIONS = ("2026-10-04",)
DEFAULT_VERSION = "2026-10-04"
HEADER = b"uhp-version"


class VersionMiddleware:
    """Refuses an unsupported version with 400 before any route runs; never substitutes one silently."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = next((v.decode("latin-1") for k, v in scope["headers"] if k == HEADER), None)
        if asked is not None and asked.strip() not in SUPPORTED_VERSIONS:
            await _refuse(send, asked)
            return
        used = (asked or DEFAULT_VERSION).strip().encode()

        async def send_with_version(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"uhp-version", used)]
            await send(message)

        await self.app(scope, receive, send_with_version)


async def _refuse(send: Send, asked: str) -> None:
    body = json.dumps(bad_request("This server does not speak the UHP version asked for in UHP-Version.",
                                  param="UHP-Version", code="unsupported_protocol_version",
                                  detail={"requested": asked[:50], "supported": list(SUPPORTED_VERSIONS)})
                      .envelope()).encode()
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"uhp-version", DEFAULT_VERSION.encode()),
    ]})
    await send({"type": "http.response.body", "body": body})
