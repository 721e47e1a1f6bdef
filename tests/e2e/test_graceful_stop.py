"""SIGTERM to a real `memfed serve`: the request in flight finishes and is in the decision log after the
exit, new connections are refused meanwhile, and a second SIGTERM ends the process at once.

The slow request is a record write that the fake mem0 (served over HTTP from the test's event loop) holds
unanswered until the test releases it, so nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.e2e._mem0_http import FakeOverHttp
from tests.e2e._process import ServeProcess
from tests.e2e._server import LoopbackServer

pytestmark = pytest.mark.e2e
ADMIN_KEY = "mf_e2e_admin_key_for_tests_only_0123456789"
MEM0_KEY_ENV = "MEMFED_E2E_MEM0_KEY"


@pytest.fixture
async def mem0_over_http() -> AsyncIterator[tuple[FakeMem0, str]]:
    fake = FakeMem0("oss")
    async with LoopbackServer(FakeOverHttp(fake)) as server:
        yield fake, server.url
        fake.release()


async def serve_in_front_of(tmp_path: Path, fake: FakeMem0, url: str) -> ServeProcess:
    config = tmp_path / "memfed.toml"
    config.write_text(f'[server]\ngrace_seconds = 120\n\n[providers.m0]\nadapter = "mem0"\nvariant = "oss"\n'
                      f'base_url = "{url}"\napi_key_env = "{MEM0_KEY_ENV}"\ntimeout = 120\n')
    # Started from a thread: the fake mem0 answers from this event loop, which must keep running.
    return await asyncio.to_thread(ServeProcess, tmp_path / "data", admin_key=ADMIN_KEY, config=config,
                                   env={MEM0_KEY_ENV: fake.api_key or ""})


def adds(fake: FakeMem0) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.url.path == "/memories")


async def held_write(server: ServeProcess, fake: FakeMem0, client: httpx.AsyncClient) -> asyncio.Task[httpx.Response]:
    """A record write in flight: sent, and held by mem0 until `fake.release()`."""
    memory = (await client.post("/v1/memories", json={"name": "Customer 7", "provider": "m0"})).json()["id"]
    fake.fail("hold", when=lambda r: r.method == "POST" and r.url.path == "/memories")
    before = adds(fake)
    request = asyncio.create_task(client.post(f"/v1/memories/{memory}/records", json={"content": "renews in March"}))
    async with asyncio.timeout(30):
        while adds(fake) == before:
            await asyncio.sleep(0.01)
    return request


async def refused_from_now_on(server: ServeProcess) -> None:
    """Wait (bounded) until a new connection to the gateway is refused: it has stopped listening."""
    async with asyncio.timeout(30):
        while True:
            try:
                async with httpx.AsyncClient(timeout=2) as fresh:
                    await fresh.get(server.base_url + "/healthz")
            except httpx.ConnectError:
                return
            await asyncio.sleep(0.05)


def audit_rows(data_dir: Path, request_id: str) -> int:
    with sqlite3.connect(data_dir / "state.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM audit_entries WHERE request_id = ?", (request_id,)).fetchone()[0])


async def test_sigterm_lets_the_request_in_flight_finish_and_commits_its_audit_entry(
    tmp_path: Path, mem0_over_http: tuple[FakeMem0, str]
) -> None:
    """SIGTERM while a write is held at mem0: new connections are refused, the write's answer still comes
    (201), the process exits 0, and the decision log in the state store holds that request's entry."""
    fake, url = mem0_over_http
    server = await serve_in_front_of(tmp_path, fake, url)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120,
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            request = await held_write(server, fake, client)
            server.process.send_signal(signal.SIGTERM)
            await refused_from_now_on(server)
            assert not request.done()
            fake.release()
            answer = await request
        status = await asyncio.to_thread(server.process.wait, 60)
    finally:
        await asyncio.to_thread(server.stop)
    assert answer.status_code == 201, answer.text
    assert status == 0, server.output()
    assert audit_rows(tmp_path / "data", answer.headers["memfed-request-id"]) >= 1


async def test_a_second_sigterm_stops_the_process_at_once(tmp_path: Path, mem0_over_http: tuple[FakeMem0, str]) -> None:
    """A write held at mem0 and a grace period of two minutes: after the first SIGTERM the gateway waits for
    the write; a second SIGTERM ends the process without waiting, saying so in one line."""
    fake, url = mem0_over_http
    server = await serve_in_front_of(tmp_path, fake, url)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120,
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            request = await held_write(server, fake, client)
            server.process.send_signal(signal.SIGTERM)
            await refused_from_now_on(server)
            server.process.send_signal(signal.SIGTERM)
            status = await asyncio.to_thread(server.process.wait, 20)
            with pytest.raises(httpx.HTTPError):
                await request
    finally:
        await asyncio.to_thread(server.stop)
    assert status == 130
    assert "a second SIGTERM: stopping at once" in server.output()
