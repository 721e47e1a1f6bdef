"""The two embedded providers side by side: SQLite (`local`) and PostgreSQL (`postgres`), called directly.

    .venv/bin/python bench/embedded_providers.py                      # 5,000 records in 50 memories
    .venv/bin/python bench/embedded_providers.py --records 20000 --memories 200
    .venv/bin/python bench/embedded_providers.py --pg postgresql+asyncpg://postgres@127.0.0.1:5432/test

Prints figures only: p50 and p99 of remember, get, list and recall (text, query, filters) in one memory
and over every memory at once. PostgreSQL runs in a schema of its own, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from adapters.base import Condition, NewRecord, Part, Provider, RecallQuery, Writer
from adapters.local import LocalProvider
from adapters.postgres import PostgresProvider

WRITER = Writer("member", "mbr_bench", "agent")
WORDS = ("renewal", "discount", "invoice", "contract", "pilot", "roadmap", "support", "onboarding")


def memory(i: int) -> str:
    return f"hmem_{i:032d}"


async def seed(provider: Provider, records: int, memories: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(records):
        text = f"Account {i % 97} asked about the {WORDS[i % len(WORDS)]} and the {WORDS[(i * 7) % len(WORDS)]}."
        await provider.remember(memory(i % memories), NewRecord(
            type="fact", content=(Part("text", text=text),), written_by=WRITER,
            written_at=start + timedelta(seconds=i), title=f"Note {i}", attributes={"n": i % 10}))


async def timed(label: str, runs: int, call: Callable[[int], Awaitable[Any]]) -> str:
    took = []
    for i in range(runs):
        began = time.perf_counter()
        await call(i)
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
    return f"{label:<28} p50 {statistics.median(took):7.2f} ms   p99 {p99:7.2f} ms"


async def measure(name: str, provider: Provider, records: int, memories: int) -> None:
    began = time.perf_counter()
    await seed(provider, records, memories)
    print(f"== {name}: seeded {records} records in {memories} memories in {time.perf_counter() - began:.1f} s")
    every = [memory(i) for i in range(memories)]
    one = memory(0)
    first = (await provider.list(one, limit=1)).items[0]
    at = datetime(2027, 1, 1, tzinfo=UTC)
    lines = [
        await timed("remember", 200, lambda i: provider.remember(one, NewRecord(
            type="note", content=(Part("text", text=f"extra {i} roadmap"),), written_by=WRITER, written_at=at))),
        await timed("get", 200, lambda i: provider.get(one, first.id)),
        await timed("list (50)", 100, lambda i: provider.list(one)),
        await timed("recall text, one memory", 100, lambda i: provider.recall([one], RecallQuery(text="discount"))),
        await timed("recall query, one memory", 100, lambda i: provider.recall(
            [one], RecallQuery(query="What did the account ask about the renewal discount?"))),
        await timed("recall text, all memories", 50, lambda i: provider.recall(every, RecallQuery(text="discount"))),
        await timed("recall query, all memories", 50, lambda i: provider.recall(
            every, RecallQuery(query="What did the account ask about the renewal discount?"))),
        await timed("recall filters, all memories", 50, lambda i: provider.recall(
            every, RecallQuery(filters=(Condition("attributes.n", "eq", 3),)))),
    ]
    for line in lines:
        print("  " + line)


async def main(records: int, memories: int, pg_url: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        local = await LocalProvider.open(Path(scratch) / "records.sqlite3")
        try:
            await measure("local (SQLite)", local, records, memories)
        finally:
            await local.close()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    engine = create_async_engine(pg_url)
    try:
        pg = await PostgresProvider.open(engine, schema=schema)
        try:
            await measure("postgres", pg, records, memories)
        finally:
            await pg.close()
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--memories", type=int, default=50)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    asyncio.run(main(args.records, args.memories, args.pg))
