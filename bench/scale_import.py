"""Bulk tree import throughput against a real `memfed serve`: 100k and 1M memories with 10,000 grants.

    .venv/bin/python bench/scale_import.py [--sizes 100000,1000000] [--grants 10000] [--postgres]

For each size a fresh gateway (SQLite state in a scratch data dir, or a PostgreSQL schema of its own with
--postgres) gets a root and 50 members over the API; a file is written with the memories (1,000 regions
below the root, customers below the regions) and the grants (to the members, on customers), and sent with
the CLI's client (`memfed import-tree`'s code, bars off). Printed per size: seconds from the first byte
sent to the report, memories per second, the server's CPU time meanwhile (on a machine shared with other
work the wall time mostly measures the share of the cores it got), the server's RSS after, and the
longest answer to `GET /healthz` (the event loop's longest stall, as a client sees it, polled every
100 ms) and to an authenticated read (served between two chunks while the imported nodes go into the
in-memory tree: gateway/state/tree_import.py). Those two are client-side times on a shared two-core
machine: they also hold the time this process and the server's writer thread kept the cores. The server's
own measure of its loop (gateway/telemetry/stall.py, `memfed_loop_stall_recent` scraped from `/metrics`
every second during the import) is printed beside them: the longest time the loop itself was held.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.cli.import_tree import import_tree
from tests.e2e._process import ServeProcess

PG = "postgresql://postgres@127.0.0.1:5432/test"
PG_ASYNC = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
ADMIN_KEY = "mf_bench_scale_import_admin_key_0123456789"
REGIONS = 1000


def write_file(path: Path, root: str, size: int, members: list[str], grants: int, rng: random.Random) -> None:
    every = max(1, (size - REGIONS) // max(1, grants))
    with path.open("w") as out:
        for r in range(REGIONS):
            out.write(json.dumps({"ref": f"r{r}", "name": f"Region {r}", "parent": root}) + "\n")
        granted = 0
        for c in range(size - REGIONS):
            line: dict[str, object] = {"name": f"Customer {c}", "parent": f"r{c % REGIONS}",
                                       "description": "one memory per customer"}
            if c % every == 0 and granted < grants:
                line["ref"] = f"c{c}"
            out.write(json.dumps(line) + "\n")
            if "ref" in line:
                grant = {"memory": f"c{c}", "principal": rng.choice(members), "privilege": "read"}
                out.write(json.dumps({"grant": grant}) + "\n")
                granted += 1


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def poll(url: str, path: str, headers: dict[str, str], stop: asyncio.Event) -> float:
    """The longest answer time (ms) to `path`, asked every 100 ms until `stop` (more often, the asking
    itself takes CPU from the server on a loaded machine)."""
    longest = 0.0
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        while not stop.is_set():
            started = time.perf_counter()
            await client.get(path)
            longest = max(longest, (time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.1)
    return longest


async def loop_stall(url: str, stop: asyncio.Event) -> float:
    """The largest `memfed_loop_stall_recent` (ms) the server reported, scraped every second until `stop`."""
    longest = 0.0
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        while not stop.is_set():
            found = re.search(r"^memfed_loop_stall_recent\w*(?:\{[^}]*\})? (\S+)$", (await client.get("/metrics")).text,
                              re.M)
            if found:
                longest = max(longest, float(found.group(1)) * 1000)
            await asyncio.sleep(1.0)
    return longest


async def one(size: int, grants: int, config: Path, scratch: Path) -> str:
    data = scratch / f"data-{size}"
    server = ServeProcess(data, admin_key=ADMIN_KEY, config=config, ready_seconds=180)
    try:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=admin, timeout=30) as client:
            root = (await client.post("/v1/memories", json={"name": "Company"})).json()["id"]
            members = []
            for i in range(50):
                made = await client.post("/v1/members", json={"name": f"m{i}", "type": "human"})
                members.append(f"member:{made.json()['id']}")
        path = scratch / f"tree-{size}.ndjson"
        write_file(path, root, size, members, grants, random.Random(size))
        megabytes = path.stat().st_size / 1e6
        stop = asyncio.Event()
        stalls = [asyncio.create_task(poll(server.base_url, "/healthz", {}, stop)),
                  asyncio.create_task(poll(server.base_url, f"/v1/memories/{root}", admin, stop)),
                  asyncio.create_task(loop_stall(server.base_url, stop))]
        err, out = io.StringIO(), io.StringIO()
        started, cpu = time.perf_counter(), cpu_seconds(server.process.pid)
        code = await import_tree(str(path), server.base_url, ADMIN_KEY, err, out)
        seconds, cpu = time.perf_counter() - started, cpu_seconds(server.process.pid) - cpu
        stop.set()
        health, read, held = await asyncio.gather(*stalls)
        if code != 0:
            return f"{size:>9,} memories: import failed: {err.getvalue().strip()[-300:]}"
        report = json.loads(out.getvalue())
        return (f"{report['memories']:>9,} memories + {report['grants']:,} grants written ({megabytes:.0f} MB): "
                f"{seconds:6.1f} s, {report['memories'] / seconds:,.0f} memories/s (server CPU {cpu:.1f} s, "
                f"{report['memories'] / cpu:,.0f} memories per CPU second); server RSS after "
                f"{rss_mb(server.process.pid):,.0f} MB; longest /healthz {health:,.0f} ms, "
                f"longest authenticated read {read:,.0f} ms; the server's loop held at most {held:,.0f} ms")
    finally:
        server.stop()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--grants", type=int, default=10_000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    engine = create_async_engine(PG_ASYNC) if args.postgres else None
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        print(f"state: {'PostgreSQL' if args.postgres else 'SQLite'}; load average before: "
              f"{Path('/proc/loadavg').read_text().split()[0]} on {os.cpu_count()} cores")
        for size in sizes:
            config = scratch / f"memfed-{size}.toml"
            config.write_text('[telemetry]\nmetrics = "prometheus"\n')  # the loop-stall gauge
            schema = f"bench_import_{uuid.uuid4().hex[:8]}"
            if engine is not None:
                async with engine.begin() as conn:
                    await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
                config.write_text(f'[state]\nurl = "{PG}"\nschema = "{schema}"\n[telemetry]\nmetrics = "prometheus"\n')
            try:
                print(await one(size, args.grants, config, scratch), flush=True)
            finally:
                if engine is not None:
                    async with engine.begin() as conn:
                        await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    if engine is not None:
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
