"""The agent's side, in-process on the embedded provider: what the outbox costs observe, what prime costs.

Prints, for N requests each (p50 / p99 in milliseconds, through httpx.ASGITransport, one client):
- one commit to the state store (an insert in its own transaction);
- `remember` of one record vs `observe` of one episode (the outbox adds two commits to the state
  store: the job with its claimed rows before the provider is called, the delivery mark after), and
  the ratio of their medians;
- `GET /v1/memories/{id}/prime` with S standing records at budgets 500 and 4000;
- the pure renderer alone on the same records.
Figures only; nothing is asserted.

    .venv/bin/python bench/agent_side.py [N] [S]
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from gateway.agent import prime as priming
from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services
from gateway.state import harness_schema as h


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms"


async def timed(n: int, call: Callable[[int], Awaitable[Any]]) -> list[float]:
    samples = []
    for index in range(n):
        started = time.perf_counter()
        await call(index)
        samples.append(time.perf_counter() - started)
    return samples


async def main(n: int, standing: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = from_mapping({}).with_overrides(data_dir=Path(tmp) / "data")
        services = await open_services(config)
        key = await bootstrap_admin(services.store, announce=False)
        app = create_app(config, services=services)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            root = (await client.post("/v1/memories", json={"name": "Bench"})).json()["id"]
            url = f"/v1/memories/{root}"
            turn = [{"type": "text", "text": "What is the refund window?", "role": "user"},
                    {"type": "text", "text": "Thirty days with a receipt.", "role": "assistant"}]

            async def remember(i: int) -> None:
                await client.post(url + "/records", json={"type": "episode", "content": turn})

            async def observe(i: int) -> None:
                await client.post(url + "/observe", json={"content": turn})

            async def commit(i: int) -> None:
                await services.store.insert(h.prime_log, request_id="bench", harness_id=None, memory_id=root,
                                            principal="bench", tokens=0, records=0, budget=0, tokenizer="-", at=0)

            committed = await timed(n, commit)
            print(f"one state-store commit {ms(committed)}   (observe makes two, prime one)")
            remembered = await timed(n, remember)
            observed = await timed(n, observe)
            print(f"remember 1 record     {ms(remembered)}")
            print(f"observe  1 episode    {ms(observed)}")
            print(f"observe / remember (p50)  {statistics.median(observed) / statistics.median(remembered):.2f}x")

            for index in range(standing):
                await client.post(url + "/records", json={
                    "type": "note", "content": f"Standing preference {index}: " + "keep it short. " * 8,
                    "attributes": {"standing": True}})
            for budget in (500, 4000):
                answers: list[dict[str, Any]] = []

                async def prime(i: int, budget: int = budget, answers: list[dict[str, Any]] = answers) -> None:
                    answers.append((await client.get(url + "/prime", params={"budget": budget})).json())

                samples = await timed(n, prime)
                last = answers[-1]
                print(f"prime {standing} standing, budget {budget:5d}: {ms(samples)}   placed "
                      f"{last['records_placed']}, left out {last['records_left_out']}, tokens {last['tokens']}")
            # The renderer alone, on records like the ones above.
            fake = tuple({"id": f"hrec_{i}", "type": "note", "memory_id": root,
                          "content": [{"type": "text", "text": f"Standing preference {i}: " + "keep it short. " * 8}],
                          "written_by": {"kind": "member", "id": "mbr_x", "type": "human"}} for i in range(standing))
            memory = priming.PrimeMemory(root, "Bench", "", ("read",), records=fake)
            pure = await timed(n, lambda i: asyncio.sleep(0, priming.render([memory], 4000)))
            print(f"render only ({standing} records, budget 4000): {ms(pure)}")
        await services.close()
    print(f"python {platform.python_version()} on {platform.machine()}, N={n}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, int(sys.argv[2]) if len(sys.argv) > 2 else 50))
