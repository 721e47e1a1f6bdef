"""Fake mem0 Platform vendors on loopback, in a process of their own so their work is not the gateway's.

    python bench/_vendor_server.py PORT [PORT ...]

Each port serves tests/adapters/fake_mem0.py's FakeMem0 over real HTTP (a negative port, -PORT, serves
tests/adapters/fake_zep.py's FakeZep, v4, on PORT). `POST /__latency?ms=N` sets how
long after its arrival every later request is answered (the fake's own work included); `GET /__calls`
and `DELETE /__calls` read and reset the request log (each call with its monotonic start and end, the
graph objects a Zep listing or search answered in `objects`,
comparable across processes).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.adapters.fake_mem0 import FakeMem0
from tests.adapters.fake_zep import FakeZep

KEY = "bench-vendor-key"


class Vendor:
    def __init__(self, zep: bool = False) -> None:
        self.fake: FakeMem0 | FakeZep = FakeZep("v4", api_key=KEY) if zep else FakeMem0("platform", KEY)
        self.host = "zep.test" if zep else "api.mem0.ai"
        self.latency = 0.0
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        path = request.url.path
        if path == "/__latency":
            self.latency = float(request.query_params["ms"]) / 1000
            response: Response = JSONResponse({"latency_ms": self.latency * 1000})
        elif path == "/__calls":
            if request.method == "DELETE":
                self.calls.clear()
            response = JSONResponse(self.calls)
        else:
            body = await request.body()
            call: dict[str, Any] = {"call": f"{request.method} {path}", "start": time.monotonic()}
            self.calls.append(call)
            url = httpx.URL(str(request.url)).copy_with(scheme="https", host=self.host, port=None)
            forwarded = httpx.Request(request.method, url, headers=request.headers.raw, content=body)
            listed = getattr(self.fake, "listed", 0)
            answer = await self.fake.respond(forwarded)
            # The graph objects this call answered (Zep's listings and searches): the candidates sent back.
            call["objects"] = getattr(self.fake, "listed", 0) - listed
            response = Response(answer.content, status_code=answer.status_code,
                                headers={"content-type": answer.headers.get("content-type", "application/json")})
            # The vendor answers L after the request arrived: the fake's own work is part of L, as a real
            # vendor's is part of its latency.
            if (rest := call["start"] + self.latency - time.monotonic()) > 0:
                await asyncio.sleep(rest)
            # CLOCK_MONOTONIC is one clock for every process on the machine, so the bench can line these
            # up with its own timings.
            call["end"] = time.monotonic()
        await response(scope, receive, send)


async def main(ports: list[int]) -> None:
    servers = [uvicorn.Server(uvicorn.Config(Vendor(zep=p < 0), host="127.0.0.1", port=abs(p),
                                             log_level="warning", lifespan="off", interface="asgi3"))
               for p in ports]
    print(json.dumps({"ports": [abs(p) for p in ports]}), flush=True)
    await asyncio.gather(*(s.serve() for s in servers))


if __name__ == "__main__":
    asyncio.run(main([int(p) for p in sys.argv[1:]]))
