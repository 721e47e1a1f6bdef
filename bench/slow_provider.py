"""Recall wall time with one provider slow, against the recall's deadline (target: at most deadline + 10%).

A root on the embedded provider with two children: one on the embedded provider, one on a mem0 Platform
fake on loopback (bench/_vendor_server.py, a process of its own) that answers every request after S
seconds, far beyond the provider's timeout. The gateway is served by uvicorn in this process; the
recalling client is in a process of its own (bench/fanout.py's RemoteClient; the N recalls at once are sent
from this process). Prints, for R recalls one after another with the gateway's deadline, R with a caller's
shorter `timeout`, and N at once: wall time p50 / max, max / the deadline that applied (target at most
1.1), the searches that reached the slow vendor, and what `degraded` said of it.

    .venv/bin/python bench/slow_provider.py [--repeat R] [--concurrent N] [--slow-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fanout import KEY, LoopbackVendors, RemoteClient

from tests.api._gateway import make_config, running_gateway
from tests.e2e._process import free_port

PROVIDER_TIMEOUT = 2.0  # the defaults of a provider's timeout and of [recall] deadline
DEADLINE = 2.5


def _said(body: dict[str, Any]) -> str:
    return ",".join(d.split(":")[-1] for d in body["degraded"] if d.startswith("provider:slow:")) or "-"


def _report(name: str, walls: list[float], limit: float, searches: int, said: collections.Counter[str]) -> None:
    print(f"{name:<34} p50 {statistics.median(walls) * 1000:7.1f} ms  max {max(walls) * 1000:7.1f} ms  "
          f"max/limit {max(walls) / limit:5.2f}  searches at the slow vendor {searches:3d}  "
          f"degraded: {', '.join(f'{k} x{v}' for k, v in sorted(said.items()))}")


async def main(args: argparse.Namespace) -> None:
    os.environ["BENCH_VENDOR_KEY"] = KEY
    vendors = LoopbackVendors(1)
    providers = {"slow": {"adapter": "mem0", "variant": "platform", "base_url": vendors.urls[0],
                          "api_key_env": "BENCH_VENDOR_KEY", "timeout": PROVIDER_TIMEOUT}}
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp), providers=providers, recall={"deadline": DEADLINE})
        async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
            root = await gw.root("Root")
            for name, provider in (("fast", "local"), ("slow", "slow")):
                child = await gw.child(gw.admin, root["id"], name, provider=provider)
                await gw.admin.post(f"/v1/memories/{child['id']}/records", json={"content": f"renewal on {name}"})
            await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "renewal"})  # counts seen
            vendors.set_latency(args.slow_seconds * 1000)
            port = free_port()
            server = uvicorn.Server(uvicorn.Config(gw.app, host="127.0.0.1", port=port, lifespan="off",
                                                   log_level="warning", access_log=False))
            serving = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            authorization = gw.admin.headers["Authorization"]
            client = RemoteClient(f"http://127.0.0.1:{port}", authorization)
            path = f"/v1/memories/{root['id']}/recall"
            print(f"one provider answering after {args.slow_seconds:g} s; its timeout {PROVIDER_TIMEOUT:g} s, "
                  f"[recall] deadline {DEADLINE:g} s; breaker opens at 5 faults and rests 30 s")
            try:
                for name, body, limit in (("one at a time, gateway deadline", {}, DEADLINE),
                                          ("one at a time, timeout 1.0", {"timeout": 1.0}, 1.0)):
                    walls, said = [], collections.Counter[str]()
                    vendors.calls(reset=True)
                    for _ in range(args.repeat):
                        gw.services.providers["slow"].breaker.succeeded()  # each recall meets a closed breaker
                        started, ended, status, answer = await client.recall(path, {"query": "renewal", **body})
                        assert status == 200, answer
                        walls.append(ended - started)
                        said[_said(answer)] += 1
                    searches = sum(1 for c in vendors.calls() if "search" in c["call"])
                    _report(name, walls, limit, searches, said)
            finally:
                client.close()
            gw.services.providers["slow"].breaker.succeeded()
            vendors.calls(reset=True)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": authorization},
                                         timeout=30.0, trust_env=False) as concurrent:
                async def one() -> tuple[float, dict[str, Any]]:
                    started = time.monotonic()
                    answer = await concurrent.post(path, json={"query": "renewal"})
                    return time.monotonic() - started, answer.json()

                done = await asyncio.gather(*(one() for _ in range(args.concurrent)))
            searches = sum(1 for c in vendors.calls() if "search" in c["call"])
            _report(f"{args.concurrent} at once, gateway deadline", [w for w, _ in done], DEADLINE, searches,
                    collections.Counter(_said(b) for _, b in done))
            server.should_exit = True
            await serving
    vendors.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--slow-seconds", type=float, default=5.0)
    asyncio.run(main(parser.parse_args()))
