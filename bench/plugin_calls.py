"""What the plugin adapter costs: start-up (launch, handshake, health, capabilities, Configure) and the
latency of each record call against the fake plugin subprocess (tests/adapters/fake_plugin.py).

    .venv/bin/python bench/plugin_calls.py [--records 200] [--reads 200]

Prints figures; asserts nothing. The fake is Python, so the figures bound memfed's side from above: a Go
plugin answers faster than this fake does. Recall lists the whole plugin (ListRecords pages of 100) and
ranks here, so its cost grows with what the plugin holds, which `--records` varies.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import RecallQuery
from tests.adapters.fake_plugin import plugin_provider
from tests.adapters.harnesses import M1, Stamps


def figures(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"{name:<10} n={len(ms):<5} p50={statistics.median(ms):7.2f} ms  p99={p99:7.2f} ms")


async def timed(n: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        out.append(time.perf_counter() - start)
    return out


async def main(records: int, reads: int) -> None:
    stamps = Stamps()
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        async with plugin_provider(Path(scratch)) as provider:
            print(f"start      {1000 * (time.perf_counter() - started):7.1f} ms (launch to Configure answered)")
            ids: list[str] = []

            async def remember(i: int) -> None:
                ids.append((await provider.remember(M1, stamps.record(f"Record {i} about renewal terms."))).id)

            figures("remember", await timed(records, remember))
            figures("get", await timed(reads, lambda i: provider.get(M1, ids[i % len(ids)])))
            figures("list", await timed(20, lambda i: provider.list(M1, limit=50)))
            figures("recall", await timed(20, lambda i: provider.recall([M1], RecallQuery(text="renewal"))))
            figures("context", await timed(20, lambda i: provider.context(M1, 2000)))
            stopping = time.perf_counter()
        print(f"stop       {1000 * (time.perf_counter() - stopping):7.1f} ms (Shutdown through the controller)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.records, args.reads))
