"""Noisy neighbour: one member saturating recalls and free queries, another member's reads beside it.

The gateway (embedded provider) is served by uvicorn in this process. A quiet member reads its own memory
(GET one record, then a recall) R times in a row from a process of its own, first on an idle gateway,
then while a noisy member, from another process, keeps C requests in flight on its own memory: recalls,
and free queries that never end on their own (each stopped by its time budget). Prints the quiet
member's p50 / p99 for each read, idle and noisy, their ratio (target at most 2x), what the noisy member
was answered (200 / 429 / 503), and the embedded provider's breaker afterwards (target: closed, no
failure counted).

    .venv/bin/python bench/noisy_neighbour.py [--reads R] [--noisy C] [--member-concurrency N]
                                              [--member-rate RPS] [--no-limits] [--quiet-pause S]
                                              [--mix both|recall|query] [--polite]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.api._gateway import make_config, running_gateway
from tests.e2e._process import free_port

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM c"
RECORDS = 200


def _quiet(conn: Any, base: str, key: str, memory: str, record: str, reads: int, pause: float) -> None:
    """R reads of each kind, one after another with `pause` s between rounds (a member within its rate);
    sends back the latencies (ms) of each kind."""
    times: dict[str, list[float]] = {"get": [], "recall": []}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30.0) as client:
        for _ in range(5):  # warm the connection and the gateway's plans
            client.get(f"/v1/memories/{memory}/records/{record}")
        for _ in range(reads):
            started = time.monotonic()
            got = client.get(f"/v1/memories/{memory}/records/{record}")
            times["get"].append((time.monotonic() - started) * 1000)
            started = time.monotonic()
            found = client.post(f"/v1/memories/{memory}/recall", json={"text": "renewal", "limit": 5})
            times["recall"].append((time.monotonic() - started) * 1000)
            assert got.status_code == 200 and found.status_code == 200, (got.text, found.text)
            time.sleep(pause)
    conn.send(times)


def _noisy(conn: Any, base: str, key: str, memory: str, threads: int, stop: Any, mix: str, polite: bool) -> None:
    """`threads` requests in flight until `stop`: recalls and endless free queries, alternating (or one
    kind alone, `mix`). After a 429 a thread waits a twentieth of Retry-After, or all of it (`polite`)."""
    seen: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def loop(index: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30.0) as client:
            n = index
            while not stop.is_set():
                n += 1
                if mix == "query" or (mix == "both" and n % 2):
                    answer = client.post(f"/v1/memories/{memory}/query",
                                         json={"language": "sql", "statement": ENDLESS})
                    kind = "query"
                else:
                    answer = client.post(f"/v1/memories/{memory}/recall", json={"text": "renewal quarter"})
                    kind = "recall"
                with lock:
                    seen[f"{kind} {answer.status_code}"] += 1
                if answer.status_code == 429:  # a client that honours Retry-After a little, as agents do
                    wait = float(answer.headers.get("retry-after", "1"))
                    time.sleep(wait if polite else min(0.05, wait / 20))

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    conn.send(dict(seen))


def _spawn(target: Any, *args: Any) -> tuple[Any, Any]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=target, args=(child, *args), daemon=True)
    process.start()
    return parent, process


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _received(conn: Any) -> Any:
    while not conn.poll():
        await asyncio.sleep(0.05)
    return conn.recv()


async def main(args: argparse.Namespace) -> None:
    limits = {} if args.no_limits else {"limits": {"member_concurrency": args.member_concurrency,
                                                   "member_rate": args.member_rate}}
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp), audit={"enabled": True}, **limits)
        async with running_gateway(config) as gw:
            root = await gw.root("Company")
            memories = [await gw.child(gw.admin, root["id"], name) for name in ("Noisy", "Quiet")]
            keys = []
            for name, memory in zip(("noisy", "quiet"), memories, strict=True):
                member_id, client = await gw.member(name, "agent")
                await gw.grant(memory["id"], f"member:{member_id}", "read")
                keys.append(client.headers["Authorization"].removeprefix("Bearer "))
            record = ""
            for memory in memories:
                for n in range(RECORDS):
                    made = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={
                        "type": "fact", "content": f"renewal terms for quarter {n} of account {n % 17}"})
                    record = made.json()["id"]
            port = free_port()
            server = uvicorn.Server(uvicorn.Config(gw.app, host="127.0.0.1", port=port, lifespan="off",
                                                   log_level="warning", access_log=False))
            serving = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            base = f"http://127.0.0.1:{port}"
            quiet = (base, keys[1], memories[1]["id"], record, args.reads, args.quiet_pause)

            conn, process = _spawn(_quiet, *quiet)
            idle = await _received(conn)
            process.join()

            stop = multiprocessing.get_context("spawn").Event()
            noisy_conn, noisy_process = _spawn(_noisy, base, keys[0], memories[0]["id"], args.noisy, stop,
                                               args.mix, args.polite)
            await asyncio.sleep(2.0)  # the noisy member has filled what it may
            conn, process = _spawn(_quiet, *quiet)
            loaded = await _received(conn)
            process.join()
            stop.set()
            noisy = await _received(noisy_conn)
            noisy_process.join()
            breaker = gw.services.providers["local"].breaker.document()
            server.should_exit = True
            await serving

    limited = "no limits" if args.no_limits else (f"member_concurrency = {args.member_concurrency}, "
                                                  f"member_rate = {args.member_rate:g}/s")
    said = f"noise {args.mix}{', polite' if args.polite else ''}, {limited}"
    print(f"noisy neighbour: embedded provider, {RECORDS} records per memory, {args.noisy} noisy requests in "
          f"flight (recalls and endless free queries), {said}, {args.reads} quiet reads of each kind")
    print(f"{'quiet read':<12} {'idle p50':>9} {'idle p99':>9} {'noisy p50':>10} {'noisy p99':>10} "
          f"{'p50 x':>6} {'p99 x':>6}")
    for kind in ("get", "recall"):
        a, b = idle[kind], loaded[kind]
        i50, i99, n50, n99 = _pct(a, 0.5), _pct(a, 0.99), _pct(b, 0.5), _pct(b, 0.99)
        print(f"{kind:<12} {i50:>7.2f}ms {i99:>7.2f}ms {n50:>8.2f}ms {n99:>8.2f}ms {n50 / i50:>5.2f}x "
              f"{n99 / i99:>5.2f}x")
    print("noisy member answered:", ", ".join(f"{k}: {v}" for k, v in sorted(noisy.items())))
    print(f"embedded provider's breaker after: {breaker['state']}, {breaker['consecutive_failures']} failures "
          f"(mean quiet get while noisy {statistics.fmean(loaded['get']):.2f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--noisy", type=int, default=16)
    parser.add_argument("--member-concurrency", type=int, default=4)
    parser.add_argument("--member-rate", type=float, default=50.0)
    parser.add_argument("--quiet-pause", type=float, default=0.05, help="seconds between the quiet member's rounds")
    parser.add_argument("--no-limits", action="store_true")
    parser.add_argument("--mix", choices=("both", "recall", "query"), default="both")
    parser.add_argument("--polite", action="store_true", help="the noisy member waits all of Retry-After")
    asyncio.run(main(parser.parse_args()))
