"""Fan-out: one recall from a root over 1,000 memories spread over 3 providers, each a fake vendor on
loopback HTTP that answers every request after L milliseconds.

The vendors speak the mem0 Platform dialect (tests/adapters/fake_mem0.py behind a real HTTP server), which
can search many memories in one call. The gateway runs in-process and reaches them over loopback. Prints
wall time / L (target at most 1.2) and the vendor calls one recall made.

    .venv/bin/python bench/fanout.py --memories 1000 --latency-ms 50 --repeat 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.adapters.fake_mem0 import FakeMem0
from tests.api.conftest import make_config, running_gateway
from tests.e2e._process import free_port

KEY = "bench-vendor-key"


class LoopbackVendor:
    """A FakeMem0 behind a real HTTP server on 127.0.0.1, answering after `latency` seconds once armed."""

    def __init__(self) -> None:
        self.fake = FakeMem0("platform", KEY)
        self.latency = 0.0
        self.calls: list[str] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off", interface="asgi3"))

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        body = await request.body()
        self.calls.append(f"{request.method} {request.url.path}")
        if self.latency:
            await asyncio.sleep(self.latency)
        # The fake answers as the hosted API would; only the host differs.
        url = httpx.URL(str(request.url)).copy_with(scheme="https", host="api.mem0.ai", port=None)
        answer = self.fake.handle(httpx.Request(request.method, url, headers=request.headers.raw, content=body))
        await Response(answer.content, status_code=answer.status_code,
                       headers={"content-type": answer.headers.get("content-type", "application/json")})(
            scope, receive, send)

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def main(args: argparse.Namespace) -> None:
    import os

    os.environ["BENCH_VENDOR_KEY"] = KEY
    vendors = [LoopbackVendor() for _ in range(3)]
    for vendor in vendors:
        await vendor.start()
    providers = {f"vendor{i}": {"adapter": "mem0", "variant": "platform", "base_url": v.url,
                                "api_key_env": "BENCH_VENDOR_KEY", "timeout": 5.0, "concurrency": 16}
                 for i, v in enumerate(vendors)}
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp), providers=providers, recall={"cap": args.memories + 10})
        async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
            root = await gw.root("Root")
            branches = [await gw.child(gw.admin, root["id"], f"branch{i}", provider=f"vendor{i}")
                        for i in range(3)]
            for n in range(args.memories):
                branch = branches[n % 3]
                made = await gw.child(gw.admin, branch["id"], f"m{n}")
                if n % 10 == 0:
                    await gw.admin.post(f"/v1/memories/{made['id']}/records", json={"content": f"needle {n}"})
            latency = args.latency_ms / 1000
            for vendor in vendors:
                vendor.latency = latency
            walls: list[float] = []
            calls: list[int] = []
            for _ in range(args.repeat):
                for vendor in vendors:
                    vendor.calls.clear()
                gw.services.counts.clear()  # count on every run: the worst case, not the cached one
                started = time.perf_counter()
                answer = await gw.admin.post(f"/v1/memories/{root['id']}/recall",
                                             json={"query": "needle", "limit": 20})
                walls.append(time.perf_counter() - started)
                calls.append(sum(len(v.calls) for v in vendors))
                body = answer.json()
                if answer.status_code != 200 or any(d.startswith("provider:") for d in body["degraded"]):
                    raise SystemExit(f"recall degraded: {answer.status_code} {body.get('degraded')}")
            searches = sum(1 for v in vendors for c in v.calls if "search" in c)
            ratios = [w / latency for w in walls]
            print(f"recall from the root over {args.memories + 4} memories on 3 loopback vendors, "
                  f"L = {args.latency_ms} ms, {args.repeat} runs")
            print(f"wall time      p50 {statistics.median(walls) * 1000:7.1f} ms   max {max(walls) * 1000:7.1f} ms")
            print(f"wall / L       p50 {statistics.median(ratios):7.2f}      max {max(ratios):7.2f}   (target <= 1.2)")
            print(f"vendor calls per recall: {statistics.median(calls):.0f} "
                  f"({searches} searches in the last run, the rest are counts of the root's children)")
            print(f"results in the last answer: {len(body['results'])}")
    for vendor in vendors:
        await vendor.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
