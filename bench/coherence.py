"""Two `memfed serve` on one PostgreSQL: how long a revoked grant or key keeps working on the other
instance (the stale-allow window), and what staying coherent costs a request.

    .venv/bin/python bench/coherence.py [--trials 30] [--calls 3000]

Window: for each trial a grant is made through A, read through B (allowed), revoked through A, and right
after A answers, B is asked again at once, several times: every allowed answer is a stale allow. Cost: the
check each request makes before deciding (`StateStore.catch_up`: one indexed `max` when nothing changed),
timed in-process against the same database, p50 and p99, beside a bare `SELECT 1` on the same pool.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.state.store import StateStore
from tests.e2e._process import ServeProcess

PG = "postgresql://postgres@127.0.0.1:5432/test"
PG_ASYNC = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
ADMIN_KEY = "mf_bench_coherence_admin_key_0123456789abcdef"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def window(a: str, b: str, trials: int, asks: int) -> tuple[int, int]:
    """(stale allows, asks after revocation) over `trials` grant-read-revoke-read rounds."""
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(base_url=a, headers=admin, timeout=30) as on_a, \
            httpx.AsyncClient(base_url=b, timeout=30) as on_b:
        member = (await on_a.post("/v1/members", json={"name": "reader", "type": "agent"})).json()
        key = (await on_a.post(f"/v1/members/{member['id']}/keys")).json()["key"]
        reader = {"Authorization": f"Bearer {key}"}
        root = (await on_a.post("/v1/memories", json={"name": "shared"})).json()
        stale = 0
        for _ in range(trials):
            grant = (await on_a.post(f"/v1/memories/{root['id']}/grants",
                                     json={"principal": f"member:{member['id']}", "privileges": ["read"]})).json()
            allowed = await on_b.get(f"/v1/memories/{root['id']}", headers=reader)
            assert allowed.status_code == 200, allowed.text
            await on_a.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")
            answers = await asyncio.gather(*(on_b.get(f"/v1/memories/{root['id']}", headers=reader)
                                             for _ in range(asks)))
            stale += sum(1 for r in answers if r.status_code == 200)
    return stale, trials * asks


async def cost(schema: str, calls: int) -> tuple[list[float], list[float]]:
    store = await StateStore.open(PG_ASYNC, search_path=schema)
    try:
        checks, bare = [], []
        for _ in range(200):
            await store.catch_up()
        for _ in range(calls):
            started = time.perf_counter()
            await store.catch_up()
            checks.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            async with store.engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
            bare.append((time.perf_counter() - started) * 1000)
        return checks, bare
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--asks", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    schema = f"bench_coherence_{uuid.uuid4().hex[:8]}"
    engine = create_async_engine(PG_ASYNC)
    async with engine.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    servers: list[ServeProcess] = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            config = Path(scratch) / "memfed.toml"
            config.write_text(f'[state]\nurl = "{PG}"\nschema = "{schema}"\n')
            for name in ("a", "b"):
                (Path(scratch) / name).mkdir()
                servers.append(ServeProcess(Path(scratch) / name / "data", admin_key=ADMIN_KEY, config=config,
                                            ready_seconds=180))
            stale, asked = await window(servers[0].base_url, servers[1].base_url, args.trials, args.asks)
            for server in servers:
                server.stop()
            servers.clear()
            checks, bare = await cost(schema, args.calls)
    finally:
        for server in servers:
            server.stop()
        async with engine.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await engine.dispose()
    print(f"stale-allow window: {stale} of {asked} requests on B after A answered the revoke "
          f"({args.trials} trials, {args.asks} concurrent asks each)")
    print(f"coherence check per request (catch_up, nothing new): p50 {statistics.median(checks):.3f} ms, "
          f"p99 {percentile(checks, 0.99):.3f} ms")
    print(f"bare SELECT 1 on the same pool:                       p50 {statistics.median(bare):.3f} ms, "
          f"p99 {percentile(bare, 0.99):.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
