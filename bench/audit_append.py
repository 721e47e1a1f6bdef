"""What the decision log costs: decide() per call on the request path, and how fast the flusher stores.

    .venv/bin/python bench/audit_append.py                       # SQLite in a temporary directory
    .venv/bin/python bench/audit_append.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/test

Prints figures only. For PostgreSQL the tables go into a schema of their own, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.audit import AuditLog, DecisionEntry


def entries(n: int) -> list[DecisionEntry]:
    """Realistic decisions: ids the gateway mints, a member in two groups, a reason from policies/access."""
    return [
        DecisionEntry(
            request_id=f"req_{i:032x}",
            principal="member:mbr_5f0c2a9e4b7d41c8a6e3f1d2b9c8a7e6",
            groups=(
                "group:grp_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e",
                "group:grp_9f8e7d6c5b4a39281706f5e4d3c2b1a0",
            ),
            operation="recall",
            memory_id=f"hmem_{i % 50:032x}",
            privilege="read",
            allowed=i % 10 != 0,
            reason=(
                "allowed by grant hgrt_3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f to group:grp_0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e "
                "on hmem_00000000000000000000000000000000 gives read,write"
                if i % 10
                else "refused: no grant on hmem_x or the ancestors that reach it; inheritance cut off at "
                "restricted memory hmem_00000000000000000000000000000007"
            ),
        )
        for i in range(n)
    ]


def percentiles(samples_ns: list[int]) -> str:
    q = statistics.quantiles(samples_ns, n=100, method="inclusive")
    mean = statistics.fmean(samples_ns)
    return f"p50 {q[49] / 1000:6.2f} µs   p99 {q[98] / 1000:6.2f} µs   mean {mean / 1000:6.2f} µs"


def time_calls(log: AuditLog, batch: list[DecisionEntry]) -> list[int]:
    clock, out = time.perf_counter_ns, []
    for entry in batch:
        t0 = clock()
        log.decide(entry)
        out.append(clock() - t0)
    return out


async def time_calls_with_flusher(log: AuditLog, batch: list[DecisionEntry]) -> list[int]:
    """decide() timed while the flusher runs: the loop yields every 100 calls, as a busy server would."""
    clock, out = time.perf_counter_ns, []
    for i, entry in enumerate(batch):
        t0 = clock()
        log.decide(entry)
        out.append(clock() - t0)
        if i % 100 == 99:
            await asyncio.sleep(0)
    return out


async def run(engine: AsyncEngine, n: int, batch_size: int) -> None:
    batch = entries(n)
    with tempfile.TemporaryDirectory() as tmp:
        clock = time.perf_counter_ns
        empty = []
        for _ in range(n):
            t0 = clock()
            empty.append(clock() - t0)
        print(f"timer alone                          {percentiles(empty)}")

        off = AuditLog(engine, Path(tmp) / "off", enabled=False)
        await off.start()
        print(f"decide(), log off                    {percentiles(time_calls(off, batch))}")
        await off.close()

        log = AuditLog(engine, Path(tmp) / "on", flush_interval=3600, batch_size=batch_size)
        await log.start()
        print(f"decide(), log on ({n} calls)     {percentiles(time_calls(log, batch))}")
        t0, cpu0, loop0 = time.perf_counter(), time.process_time(), time.thread_time()
        await log.flush()
        took, cpu, loop = time.perf_counter() - t0, time.process_time() - cpu0, time.thread_time() - loop0
        print(f"flush of {n} entries (batches of {batch_size}): {took:.2f} s = {n / took:,.0f} entries/s")
        print(f"flush CPU per entry: {loop / n * 1e6:.1f} µs on the event loop's thread, "
              f"{cpu / n * 1e6:.1f} µs in all threads")

        await log.close()
        log = AuditLog(engine, Path(tmp) / "on", flush_interval=0.1, batch_size=batch_size)
        await log.start()
        t0 = time.perf_counter()
        samples = await time_calls_with_flusher(log, batch)
        print(f"decide(), flusher running            {percentiles(samples)}")
        await log.close()
        took = time.perf_counter() - t0
        print(f"decide + flush of {n} entries, flusher in the background: {n / took:,.0f} entries/s")
        report = await log.verify()
        print(f"verify of {report.checked} entries: ok={report.ok}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--db", default="")
    args = parser.parse_args()
    if not args.db:
        with tempfile.TemporaryDirectory() as tmp:
            engine = create_async_engine(f"sqlite+aiosqlite:///{tmp}/audit.db")
            print("database: SQLite (temporary file)")
            await run(engine, args.n, args.batch_size)
            await engine.dispose()
        return
    schema = f"audit_bench_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(args.db)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        print(f"database: {admin.url.get_backend_name()} (schema {schema})")
        await run(admin.execution_options(schema_translate_map={None: schema}), args.n, args.batch_size)
    finally:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


if __name__ == "__main__":
    asyncio.run(main())
