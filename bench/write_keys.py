"""What an Idempotency-Key costs a write, in-process on the embedded provider (through httpx.ASGITransport).

The key is claimed in the state store before the work (one commit) and its outcome kept after it (one
more), against the earlier design's one read and one insert; the embedded provider also looks the write
id up inside its write. Side by side in one run, in interleaved rounds, N requests each:
- `remember` without a key;
- `remember` with a fresh key each time;
- a repeat of an earlier keyed remember (a replay: one read of the key's row, no provider call);
and the ratio of the keyed median to the unkeyed one. Figures only; nothing is asserted.

    .venv/bin/python bench/write_keys.py [N] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services


async def main(n: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = from_mapping({"audit": {"enabled": False}}).with_overrides(data_dir=Path(tmp) / "data")
        services = await open_services(config)
        key = await bootstrap_admin(services.store, announce=False)
        app = create_app(config, services=services)
        samples: dict[str, list[float]] = {"no key": [], "fresh key": [], "replay": []}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            root = (await client.post("/v1/memories", json={"name": "Bench"})).json()["id"]
            url = f"/v1/memories/{root}/records"
            for _ in range(20):  # warm-up
                await client.post(url, json={"content": "warm"})
            for r in range(rounds):
                for kind in samples:
                    for i in range(n):
                        # A replay repeats the fresh-key round's request: same key, same body.
                        headers = {"Idempotency-Key": f"k-{r}-{i}"} if kind != "no key" else {}
                        started = time.perf_counter()
                        answer = await client.post(url, json={"content": f"note {r}-{i}"}, headers=headers)
                        samples[kind].append(time.perf_counter() - started)
                        if answer.status_code != 201:
                            raise SystemExit(f"{kind}: {answer.status_code} {answer.text}")
        await services.close()
    print(f"python {platform.python_version()}, {n} requests x {rounds} rounds per kind, interleaved by round")
    medians = {}
    for kind, values in samples.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        medians[kind] = statistics.median(ordered)
        print(f"  remember, {kind:9}  p50 {medians[kind] * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms")
    print(f"  fresh key / no key (p50): {medians['fresh key'] / medians['no key']:.2f}x")
    print(f"  replay / no key (p50):    {medians['replay'] / medians['no key']:.2f}x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, int(sys.argv[2]) if len(sys.argv) > 2 else 3))
