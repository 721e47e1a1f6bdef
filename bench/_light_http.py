"""A minimal HTTP/1.1 client for load generation: kept-alive connections on asyncio streams.

A load generator should add as little of its own time as it can to what it measures. httpx spends
several hundred microseconds of CPU per request, which on a 2-core machine shares the CPU with the
server under test; this sends a POST with a JSON body and reads a Content-Length answer, nothing more.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class LightClient:
    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self._host, self._port = host, port
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        """Status, headers (lower-cased names) and body of one POST."""
        if self._idle:
            try:
                return await self._post(self._idle.pop(), path, body)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the server closed a kept-alive connection: ask again on a new one
        return await self._post(await asyncio.open_connection(self._host, self._port), path, body)

    async def _post(self, connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], path: str,
                    body: Any) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        reader, writer = connection
        payload = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\n{self._fixed}Content-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n")
        writer.write(head.encode() + payload)
        status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        data = await reader.readexactly(int(headers.get("content-length", "0")))
        self._idle.append((reader, writer))
        return int(status_line.split()[1]), headers, data

    async def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
