"""A big tree served by `memfed serve` (issue 12 item 5): cold start, memory, listing pages, loop stalls.

    .venv/bin/python bench/scale.py                      # 100,000 then 1,000,000 memories
    .venv/bin/python bench/scale.py --memories 100000 --grants 10000 [--postgres]

For each size: a fresh state store seeded by bulk SQL (bench/_scale_seed.py), then `memfed serve` started as
a real process, and printed:
* seconds from the start to the port answering `/healthz`, and to `/readyz` 200 (the largest `/healthz`
  latency seen while loading, which is how long the loop was held at most, plus a round trip);
* the server's RSS once ready (/proc/PID/status);
* p50/p99 of listing pages: `?parent=` the big fan-out parent, `?ancestor=` the root (both as the admin,
  who made every memory), entry points for the admin (a million implicit grants at 1M) and for a member
  holding `--grants` grants; the first (cold) entry-point page is printed apart, since it computes the list
  the later pages bisect;
* the longest `/healthz` answer while the listings run, from a ticker thread asking every 10 ms;
* the loop's longest stall measured inside the server (gateway/telemetry/stall.py, read from `/metrics`,
  which the bench turns on): since the start once ready (the load), and over the listings (the largest
  `memfed_loop_stall_recent` seen, scraped every second, after waiting out the load's window), with the
  count of stalls over 20 ms in each phase.

Prints figures; asserts nothing. The machine is shared: figures are what this run saw.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._scale_seed import ADMIN_KEY, MEMBER_KEY, Seeded, seed_postgres, seed_sqlite
from tests.e2e._process import free_port, memfed_command

PG = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "memfed_scale_bench"
PAGES = 150


STALL_WINDOW = 10.0  # the server's `memfed_loop_stall_recent` covers this many seconds


def _gauges(client: httpx.Client) -> dict[str, float]:
    """The loop-stall gauges of the server's /metrics, by name."""
    text = client.get("/metrics").text
    return {name: float(value) for name, value in
            re.findall(r"^(memfed_loop_stall\w*?)(?:_seconds)?(?:\{[^}]*\})? (\S+)$", text, re.M)}


class Ticker(threading.Thread):
    """Asks /healthz every 10 ms and keeps the longest answer: the loop held for longer shows here. Every
    second it also reads the server's own loop-stall gauges and keeps the largest recent stall."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base, self.longest, self.stop = base, 0.0, threading.Event()
        self.times: list[float] = []
        self.stall, self.gauges, self._scraped = 0.0, dict[str, float](), 0.0

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as client:
            while not self.stop.is_set():
                began = time.perf_counter()
                try:
                    client.get("/healthz")
                except httpx.HTTPError:
                    time.sleep(0.01)
                    continue
                took = time.perf_counter() - began
                self.times.append(took)
                self.longest = max(self.longest, took)
                if time.monotonic() - self._scraped >= 1.0:
                    self._scraped = time.monotonic()
                    with contextlib.suppress(httpx.HTTPError):
                        self.gauges = _gauges(client)
                    self.stall = max(self.stall, self.gauges.get("memfed_loop_stall_recent", 0.0))
                time.sleep(0.01)

    def reset(self) -> None:
        self.longest, self.times, self.stall = 0.0, [], 0.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] * 1000


async def _pages(client: httpx.AsyncClient, params: dict[str, str], key: str, most: int = PAGES) -> list[float]:
    """Seconds per page, following `next` up to `most` pages."""
    took: list[float] = []
    cursor: str | None = None
    for _ in range(most):
        began = time.perf_counter()
        page = {**params, "limit": "50", **({"cursor": cursor} if cursor else {})}
        answer = await client.get("/v1/memories", params=page, headers={"Authorization": f"Bearer {key}"})
        took.append(time.perf_counter() - began)
        if answer.status_code != 200:
            raise RuntimeError(f"{params}: {answer.status_code} {answer.text[:300]}")
        cursor = answer.json()["next"]
        if cursor is None:
            break
    return took


def _line(label: str, took: list[float]) -> str:
    return f"  {label:<42} pages={len(took):4d}  p50={_pct(took, 0.5):8.2f} ms  p99={_pct(took, 0.99):8.2f} ms"


async def _listings(base: str, seeded: Seeded, ticker: Ticker) -> None:
    await asyncio.sleep(STALL_WINDOW + 1.5)  # the recent stall figure forgets the load before listings start
    ticker.reset()
    stalls_before = ticker.gauges.get("memfed_loop_stalls", 0.0)
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        runs = [
            ("?parent=<big fan-out parent> (admin)", {"parent": seeded.big_parent}, ADMIN_KEY),
            ("?ancestor=<root> (admin)", {"ancestor": seeded.root}, ADMIN_KEY),
        ]
        for label, params, key in runs:
            print(_line(label, await _pages(client, params, key)), flush=True)
        for label, key in (("entry points (admin)", ADMIN_KEY), ("entry points (member, many grants)", MEMBER_KEY)):
            cold = await _pages(client, {}, key, most=1)
            print(f"  {label + ', first page (cold)':<42} {cold[0] * 1000:8.1f} ms", flush=True)
            warm = await _pages(client, {}, key)
            print(_line(label, warm), flush=True)
        print(f"  longest /healthz answer during listings: {ticker.longest * 1000:.1f} ms "
              f"(median {statistics.median(ticker.times) * 1000:.1f} ms over {len(ticker.times)} asks)", flush=True)
    await asyncio.sleep(1.5)  # one more scrape, covering the last pages
    print(f"  loop stall inside the server during listings: longest {ticker.stall * 1000:.1f} ms, "
          f"{ticker.gauges.get('memfed_loop_stalls', 0.0) - stalls_before:.0f} stalls over 20 ms", flush=True)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(memories: int, grants: int, postgres: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="memfed-scale-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir(mode=0o700)
        began = time.monotonic()
        args = [*memfed_command(), "serve", "--port", str(port := free_port()), "--data-dir", str(data)]
        config = work / "memfed.toml"
        settings = '[telemetry]\nmetrics = "prometheus"\n'  # the loop-stall gauges are read from /metrics
        if postgres:
            seeded = asyncio.run(seed_postgres(PG, SCHEMA, memories, grants))
            settings += f'[state]\nurl = "{PG}"\nschema = "{SCHEMA}"\n'
        else:
            seeded = seed_sqlite(str(data / "state.sqlite3"), memories, grants)
        config.write_text(settings)
        args += ["--config", str(config)]
        print(f"{seeded.memories:,} memories, {seeded.grants:,} grants ({'PostgreSQL' if postgres else 'SQLite'}): "
              f"seeded in {time.monotonic() - began:.1f} s", flush=True)
        base = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ticker = Ticker(base)
        try:
            bound = ready = None
            progress: list[int] = []
            with httpx.Client(base_url=base, timeout=30) as client:
                while time.monotonic() - started < 300 and process.poll() is None:
                    try:
                        answer = client.get("/readyz")
                    except httpx.HTTPError:
                        time.sleep(0.005)
                        continue
                    if bound is None:
                        bound, bound_cpu = time.monotonic() - started, _cpu_seconds(process.pid)
                        ticker.start()
                    if answer.status_code == 200:
                        ready, ready_cpu = time.monotonic() - started, _cpu_seconds(process.pid)
                        break
                    if "progress" in answer.json():
                        progress.append(answer.json()["progress"])
                    time.sleep(0.05)
            if ready is None or bound is None:
                raise RuntimeError(f"not ready: {process.stderr.read() if process.poll() is not None else 'timeout'}")
            print(f"  cold start: port bound {bound:.2f} s (server CPU {bound_cpu:.2f} s), ready {ready:.2f} s "
                  f"(server CPU {ready_cpu:.2f} s) "
                  f"(readiness progress seen: {progress[:1] + progress[-1:]} of {len(progress)} probes); "
                  f"longest /healthz while loading {ticker.longest * 1000:.1f} ms", flush=True)
            with httpx.Client(base_url=base, timeout=30) as client:
                loaded = _gauges(client)
            print(f"  loop stall inside the server since the start (the load): longest "
                  f"{loaded.get('memfed_loop_stall_max', float('nan')) * 1000:.1f} ms, "
                  f"{loaded.get('memfed_loop_stalls', float('nan')):.0f} stalls over 20 ms", flush=True)
            print(f"  RSS once ready: {_rss_mb(process.pid):.0f} MB", flush=True)
            asyncio.run(_listings(base, seeded, ticker))
            print(f"  RSS after listings: {_rss_mb(process.pid):.0f} MB", flush=True)
        finally:
            ticker.stop.set()
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, action="append", help="memories (default: 100000 then 1000000)")
    parser.add_argument("--grants", type=int, default=10_000, help="grants held by the member (default 10000)")
    parser.add_argument("--postgres", action="store_true", help=f"seed and serve from PostgreSQL ({PG})")
    args = parser.parse_args()
    for count in args.memories or [100_000, 1_000_000]:
        run_one(count, args.grants, args.postgres)


if __name__ == "__main__":
    main()
