"""Operations figures: how long `memfed serve` takes to bind its port, to be ready and to stop on SIGTERM, and
what recording the metrics costs a request (in-process, the same reads with `[telemetry] metrics` off and on).

    .venv/bin/python bench/ops.py --starts 3 --requests 3000

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services
from gateway.telemetry.export import Telemetry
from tests.e2e._process import free_port, memfed_command


def _poll(url: str, until: float, want: int | None = None) -> float:
    while time.monotonic() < until:
        try:
            answer = httpx.get(url, timeout=0.5)
            if want is None or answer.status_code == want:
                return time.monotonic()
        except httpx.HTTPError:
            pass
        time.sleep(0.005)
    raise RuntimeError(f"{url} did not answer in time")


def one_start(workdir: Path) -> tuple[float, float, float]:
    """(to the port answering /healthz, to /readyz 200, SIGTERM to exit), in seconds, on a fresh data dir."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    process = subprocess.Popen([*memfed_command(), "serve", "--port", str(port), "--data-dir", str(workdir)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={"MEMFED_ADMIN_KEY": "mf_bench_admin_key_0123456789", "PATH": "/usr/bin:/bin"})
    try:
        bound = _poll(base + "/healthz", started + 60)
        ready = _poll(base + "/readyz", started + 60, want=200)
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        stopped = time.monotonic()
    finally:
        if process.poll() is None:
            process.kill()
    return bound - started, ready - started, stopped - stopping


async def per_request(metrics: str, requests: int, tmp: Path) -> float:
    """Mean microseconds per GET /v1/memories/{id} through the whole app (ASGI, in-process)."""
    config = from_mapping({"telemetry": {"metrics": metrics}}).with_overrides(data_dir=tmp)
    telemetry = Telemetry(config)
    services = await open_services(config)
    try:
        key = await bootstrap_admin(services.store, announce=False)
        app = create_app(config, services=services, telemetry=telemetry)
        await telemetry.start(services)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            memory = (await client.post("/v1/memories", json={"name": "Bench"})).json()["id"]
            for _ in range(200):  # warm up
                await client.get(f"/v1/memories/{memory}")
            began = time.perf_counter()
            for _ in range(requests):
                await client.get(f"/v1/memories/{memory}")
            return (time.perf_counter() - began) / requests * 1e6
    finally:
        await telemetry.close()
        await services.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.starts):
            bound, ready, stop = one_start(Path(tmp) / f"start{n}")
            print(f"start {n + 1}: port answering {bound:.2f} s, ready {ready:.2f} s; SIGTERM to exit {stop:.2f} s")
        for metrics in ("off", "prometheus", "off", "prometheus"):
            mean = asyncio.run(per_request(metrics, args.requests, Path(tmp) / f"req-{metrics}-{time.time_ns()}"))
            print(f"metrics {metrics:>10}: {mean:.0f} µs per GET /v1/memories/{{id}} (mean of {args.requests})")


if __name__ == "__main__":
    main()
