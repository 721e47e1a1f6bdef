"""Free queries on the embedded provider: what the container costs, and how far past its budget a
statement that will not stop runs.

Prints, on one memory of M records (and another memory of M records that is never copied):
- a free query that returns one row (`SELECT count(*) FROM records`), p50 / p99 of R runs, for
  M = 100, 1000, 10000: almost all of it is copying the memory into the container;
- the same count on the provider's own file, without the container, for the ratio;
- wall time of statements that hit the 1 s budget (endless CTE, sort, UNION of 1 MiB rows) and the
  process's peak resident memory after them.
Figures only; nothing is asserted.

    .venv/bin/python bench/queries.py [R]
"""

from __future__ import annotations

import asyncio
import platform
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.base import NewRecord, Part, Writer
from adapters.local import LocalProvider

WRITER = Writer("member", "mbr_bench", "agent")
M1, M2 = "hmem_" + "1" * 32, "hmem_" + "2" * 32
BOMBS = {
    "endless recursive CTE": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "sort of an endless CTE": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c "
                              "ORDER BY x DESC LIMIT 1",
    "UNION of 1 MiB rows": "WITH RECURSIVE d(s) AS (SELECT 'a' UNION ALL SELECT s || s FROM d WHERE length(s) < "
                           "1048576), c(n, s) AS (SELECT 1, (SELECT max(s) FROM d) UNION SELECT n + 1, s FROM c) "
                           "SELECT count(*) FROM c",
}


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:8.2f} ms   p99 {p99 * 1000:8.2f} ms"


async def fill(local: LocalProvider, memory: str, n: int, start: datetime) -> None:
    for i in range(n):
        text = f"Record {i} of {memory[-4:]}: Acme renewal notes, procurement, discount terms and a follow-up."
        await local.remember(memory, NewRecord(
            type="fact" if i % 2 else "note", content=(Part("text", text=text),), written_by=WRITER,
            written_at=start + timedelta(seconds=i), title=f"r{i}", attributes={"account": f"a{i % 7}", "n": i}))


async def main(runs: int) -> None:
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.machine()}, runs={runs}")
    start = datetime(2026, 10, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "records.sqlite3"
        local = await LocalProvider.open(path)
        have = 0
        try:
            for m in (100, 1000, 10000):
                await fill(local, M1, m - have, start + timedelta(days=m))
                await fill(local, M2, m - have, start + timedelta(days=m))
                have = m
                samples = []
                for _ in range(runs):
                    t = time.perf_counter()
                    await local.run_free(M1, "sql", "SELECT count(*) FROM records", {})
                    samples.append(time.perf_counter() - t)
                direct = sqlite3.connect(path)
                plain = []
                for _ in range(runs):
                    t = time.perf_counter()
                    direct.execute("SELECT count(*) FROM versions WHERE memory_id = ? AND invalidated_at IS NULL",
                                   (M1,)).fetchall()
                    plain.append(time.perf_counter() - t)
                direct.close()
                ratio = statistics.median(samples) / statistics.median(plain)
                print(f"free query, M={m:>6}: {ms(samples)}   (on the file itself {ms(plain)}; x{ratio:,.0f})")
            for name, statement in BOMBS.items():
                t = time.perf_counter()
                answer = await local.run_free(M1, "sql", statement, {}, max_seconds=1.0)
                wall = time.perf_counter() - t
                print(f"budget 1 s, {name:<24}: wall {wall:5.2f} s   degraded {list(answer.degraded)}")
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"peak resident memory of this process: {peak} MB")
        finally:
            await local.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
