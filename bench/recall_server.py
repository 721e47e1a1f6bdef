"""Recall through a running `memfed serve` on the embedded provider holding many records.

Seeds the state and the embedded provider directly (HTTP seeding would time the seeding, not recall),
then starts the server as a real process and times recalls from the root over loopback HTTP.

    .venv/bin/python bench/recall_server.py --records 100000 --memories 100 --requests 500
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import NewRecord, Part, Writer
from gateway.app import bootstrap_admin, open_services
from gateway.config import from_mapping
from tests.e2e._process import ServeProcess

# A vocabulary of 5,000 words drawn with Zipf's law (the k-th most common word is k times rarer than the
# first), as words are in real text: a few words are in a large share of records, most are rare.
VOCABULARY = [f"word{i}" for i in range(5000)]
WEIGHTS = [1.0 / (i + 1) for i in range(5000)]


def words(rng: random.Random, k: int) -> list[str]:
    return rng.choices(VOCABULARY, WEIGHTS, k=k)
ADMIN_KEY = "mf_bench_admin_key_0123456789abcdef"


async def seed(data_dir: Path, records: int, memories: int, seed_value: int) -> str:
    rng = random.Random(seed_value)
    config = from_mapping({}).with_overrides(data_dir=data_dir)
    import os

    os.environ["MEMFED_ADMIN_KEY"] = ADMIN_KEY
    services = await open_services(config)
    await bootstrap_admin(services.store, announce=False)
    admin = next(iter(services.store._members.values()))
    root = await services.store.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                              provider="local", created_by=admin.id)
    children = [await services.store.create_memory(name=f"m{i}", description="", parent_id=root.id,
                                                   restricted=False, provider="local", created_by=admin.id)
                for i in range(memories)]
    provider = services.providers["local"].provider
    writer = Writer("member", admin.id, "human")
    started = time.perf_counter()
    for i in range(records):
        memory = children[i % memories]
        text = " ".join(words(rng, 12)) + f" item{i}"
        await provider.remember(memory.id, NewRecord("fact", (Part("text", text=text),), writer,
                                                     datetime.now(UTC), attributes={"n": i % 10}))
    print(f"seeded {records} records in {memories} memories in {time.perf_counter() - started:.1f} s")
    await services.close()
    return root.id


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        root_id = asyncio.run(seed(data_dir, args.records, args.memories, args.seed))
        server = ServeProcess(data_dir, admin_key=ADMIN_KEY)
        try:
            rng = random.Random(args.seed)
            client = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                  timeout=30.0)
            for _ in range(20):  # warm-up
                client.post(f"/v1/memories/{root_id}/recall", json={"text": words(rng, 1)[0]})
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
                answer = client.post(f"/v1/memories/{root_id}/recall", json=body)
                timings[kind].append((time.perf_counter() - started) * 1000)
                if answer.status_code != 200:
                    raise SystemExit(f"recall failed: {answer.status_code} {answer.text[:200]}")
            everything = [t for values in timings.values() for t in values]
            print(f"recall from the root over {args.memories + 1} memories, {args.records} records, "
                  f"{args.requests} sequential requests over loopback HTTP")
            print(f"{'signal':8} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
            for kind, values in (*timings.items(), ("all", everything)):
                print(f"{kind:8} {len(values):5d} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f} "
                      f"{statistics.mean(values):8.2f}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
