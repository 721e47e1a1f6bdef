"""A real `memfed serve` exporting spans and metrics by OTLP/HTTP to a collector faked in the test, and serving
/metrics on a port of its own: what leaves the process carries the route templates and none of the keys
(mem0's, a member's, the admin's)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.e2e._mem0_http import FakeOverHttp
from tests.e2e._process import ServeProcess, free_port
from tests.e2e._server import LoopbackServer

pytestmark = pytest.mark.e2e
ADMIN_KEY = "mf_e2e_admin_key_for_tests_only_0123456789"
MEM0_KEY_ENV = "MEMFED_E2E_MEM0_KEY"


class Collector:
    """An OTLP/HTTP collector that keeps every body it is sent, by path, and answers 200."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.setdefault(scope["path"], []).append(body)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-protobuf")]})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
async def outside() -> AsyncIterator[tuple[FakeMem0, str, Collector, str]]:
    fake, collector = FakeMem0("oss"), Collector()
    async with LoopbackServer(FakeOverHttp(fake)) as mem0, LoopbackServer(collector) as otlp:
        yield fake, mem0.url, collector, otlp.url


async def test_exported_spans_and_metrics_name_routes_and_carry_no_key(
    tmp_path: Path, outside: tuple[FakeMem0, str, Collector, str]
) -> None:
    """Writes and recalls as a member on the embedded provider and on mem0, then SIGTERM: the collector has
    received spans and metrics (sent at the stop at the latest), the spans name the records route by its
    template, /metrics answers on its own port (and not on the gateway's), and no key is in any of it."""
    fake, mem0_url, collector, otlp_url = outside
    metrics_port = free_port()
    config = tmp_path / "memfed.toml"
    config.write_text(f'[telemetry]\nexporter = "otlp"\nmetrics = ["prometheus", "otlp"]\n'
                      f'metrics_port = {metrics_port}\notlp_endpoint = "{otlp_url}"\n\n'
                      f'[providers.m0]\nadapter = "mem0"\nvariant = "oss"\nbase_url = "{mem0_url}"\n'
                      f'api_key_env = "{MEM0_KEY_ENV}"\n')
    server = await asyncio.to_thread(ServeProcess, tmp_path / "data", admin_key=ADMIN_KEY, config=config,
                                     env={MEM0_KEY_ENV: fake.api_key or ""})
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30,
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as admin:
            root = (await admin.post("/v1/memories", json={"name": "Company"})).json()["id"]
            vendor = (await admin.post("/v1/memories", json={"name": "At mem0", "parent_id": root,
                                                             "provider": "m0"})).json()["id"]
            member = (await admin.post("/v1/members", json={"name": "bot", "type": "agent"})).json()["id"]
            member_key = (await admin.post(f"/v1/members/{member}/keys")).json()["key"]
            await admin.post(f"/v1/memories/{root}/grants",
                             json={"principal": f"member:{member}", "privileges": ["read", "write"]})
            bot = {"Authorization": f"Bearer {member_key}"}
            for memory in (root, vendor):
                made = await admin.post(f"/v1/memories/{memory}/records", headers=bot, json={"content": "renews"})
                assert made.status_code == 201, made.text
            recalled = await admin.post(f"/v1/memories/{root}/recall", headers=bot, json={"query": "renews"})
            assert recalled.status_code == 200
            assert (await admin.get("/metrics")).status_code == 404
        async with httpx.AsyncClient(timeout=10) as scraper:
            scraped = await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")
        server.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.process.wait, 60) == 0, server.output()
    finally:
        await asyncio.to_thread(server.stop)
    assert scraped.status_code == 200 and b"memfed_provider_call_duration_seconds" in scraped.content
    traces = b"".join(collector.bodies.get("/v1/traces", []))
    metrics = b"".join(collector.bodies.get("/v1/metrics", []))
    assert b"/v1/memories/{memory_id}/records" in traces
    assert b"memfed.provider.call.duration" in metrics and b"http.server.request.duration" in metrics
    for secret in (fake.api_key or "?", member_key, ADMIN_KEY):
        for exported in (traces, metrics, scraped.content):
            assert secret.encode() not in exported
    assert fake.api_key and fake.api_key not in server.output()
