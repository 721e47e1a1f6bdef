"""Recall throughput with the decision log on and off: the same recalls through `memfed serve`, closed
loop with a few clients, once with `[audit] enabled = true` and once with false.

    .venv/bin/python bench/audit_ratio.py --records 5000 --memories 100 --seconds 15 --clients 4
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _seed import ADMIN_KEY, seed, words

from tests.e2e._process import ServeProcess


async def throughput(server: ServeProcess, root_id: str, seconds: float, clients: int, seed_value: int) -> float:
    rng = random.Random(seed_value)
    done = 0
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                 timeout=30.0) as client:
        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                answer = await client.post(f"/v1/memories/{root_id}/recall",
                                           json={"text": " ".join(words(rng, 2)), "limit": 10})
                if answer.status_code != 200:
                    raise SystemExit(f"recall failed: {answer.status_code}")
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return done / (time.perf_counter() - started)


def run(enabled: bool, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        seeded = asyncio.run(seed(data_dir, args.records, args.memories, args.seed))
        config = Path(tmp) / "memfed.toml"
        config.write_text(f"[audit]\nenabled = {'true' if enabled else 'false'}\n")
        server = ServeProcess(data_dir, admin_key=ADMIN_KEY, config=config)
        try:
            asyncio.run(throughput(server, seeded.root_id, 2.0, args.clients, args.seed))  # warm-up
            return asyncio.run(throughput(server, seeded.root_id, args.seconds, args.clients, args.seed))
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    off = run(False, args)
    on = run(True, args)
    print(f"recall from the root over {args.memories + 1} memories, {args.records} records, "
          f"{args.clients} clients, {args.seconds:.0f} s each")
    print(f"decision log off: {off:7.1f} recalls/s")
    print(f"decision log on:  {on:7.1f} recalls/s   ({args.memories + 1} decisions per recall, in one chain entry)")
    print(f"ratio on/off: {on / off:.2f}   (target >= 0.9)")


if __name__ == "__main__":
    main()
