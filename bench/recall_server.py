"""Recall through a running `memfed serve` on the embedded provider holding many records.

Seeds the state and the embedded provider directly (see _seed.py), then starts the server as a real
process and times sequential recalls from the root over loopback HTTP, per signal.

    .venv/bin/python bench/recall_server.py --records 100000 --memories 100 --requests 600
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _seed import ADMIN_KEY, percentile, seed, words

from tests.e2e._process import ServeProcess


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        seeded = asyncio.run(seed(data_dir, args.records, args.memories, args.seed))
        print(f"seeded {args.records} records in {args.memories} memories in {seeded.seconds:.1f} s")
        server = ServeProcess(data_dir, admin_key=ADMIN_KEY)
        try:
            rng = random.Random(args.seed)
            client = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                  timeout=30.0)
            path = f"/v1/memories/{seeded.root_id}/recall"
            for _ in range(20):  # warm-up
                client.post(path, json={"text": words(rng, 1)[0]})
            timings: dict[str, list[float]] = {"text": [], "query": [], "filters": []}
            for i in range(args.requests):
                kind = ("text", "query", "filters")[i % 3]
                body: dict[str, object] = {"limit": 10}
                if kind == "text":
                    body["text"] = " ".join(words(rng, 2))
                elif kind == "query":
                    first, second = words(rng, 2)
                    body["query"] = f"what do we know about {first} and {second}?"
                else:
                    body["filters"] = {"field": "attributes.n", "op": "eq", "value": rng.randrange(10)}
                started = time.perf_counter()
                answer = client.post(path, json=body)
                timings[kind].append((time.perf_counter() - started) * 1000)
                if answer.status_code != 200:
                    raise SystemExit(f"recall failed: {answer.status_code} {answer.text[:200]}")
        finally:
            server.stop()
    everything = [t for values in timings.values() for t in values]
    print(f"recall from the root over {args.memories + 1} memories, {args.records} records, "
          f"{args.requests} sequential requests over loopback HTTP")
    print(f"{'signal':8} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for kind, values in (*timings.items(), ("all", everything)):
        print(f"{kind:8} {len(values):5d} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f} "
              f"{statistics.mean(values):8.2f}")


if __name__ == "__main__":
    main()
