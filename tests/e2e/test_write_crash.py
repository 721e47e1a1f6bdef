"""kill -9 during a vendor write, then a client retry: one record and one episode (issue 10 item 1).

`memfed serve` runs as a real process in front of the mem0 OSS fake, which is served over real HTTP from
the test's own event loop. The fake applies the write and withholds its answer, the gateway is killed
with SIGKILL while it waits, a new gateway starts on the same data directory, and the client repeats its
request with the same Idempotency-Key. The repeat takes over the dead gateway's claim on the key, finds
the write at mem0 by its write id, and writes nothing again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.e2e._mem0_http import FakeOverHttp
from tests.e2e._process import ServeProcess
from tests.e2e._server import LoopbackServer

pytestmark = pytest.mark.e2e
ADMIN_KEY = "mf_e2e_admin_key_for_tests_only_0123456789"
MEM0_KEY_ENV = "MEMFED_E2E_MEM0_KEY"
TURN = [{"type": "text", "text": "Can I return shoes after 30 days?", "role": "user"},
        {"type": "text", "text": "Only with a receipt.", "role": "assistant"}]


@pytest.fixture
async def mem0_over_http() -> AsyncIterator[tuple[FakeMem0, str]]:
    fake = FakeMem0("oss")
    async with LoopbackServer(FakeOverHttp(fake)) as server:
        yield fake, server.url
        fake.release()  # the withheld answers go out, so the server can stop


def write_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "memfed.toml"
    path.write_text(f"""
[idempotency]
lease_seconds = 1

[providers.m0]
adapter = "mem0"
variant = "oss"
base_url = "{base_url}"
api_key_env = "{MEM0_KEY_ENV}"
timeout = 2.0
write_settle = 0.5
""")
    return path


async def serve(tmp_path: Path, config: Path, fake: FakeMem0) -> ServeProcess:
    # Started from a thread: the fake mem0 answers from this event loop, which must keep running.
    return await asyncio.to_thread(ServeProcess, tmp_path / "data", admin_key=ADMIN_KEY, config=config,
                                   env={MEM0_KEY_ENV: fake.api_key or ""})


def adds(fake: FakeMem0) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.url.path == "/memories")


async def killed_while_sending(server: ServeProcess, fake: FakeMem0, path: str, body: dict[str, Any],
                               key: str) -> None:
    """Send the request; once mem0 holds its write, SIGKILL the gateway and let the request die."""
    before = adds(fake)
    async with httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                 timeout=30) as client:
        request = asyncio.create_task(client.post(path, json=body, headers={"Idempotency-Key": key}))
        async with asyncio.timeout(30):
            while adds(fake) == before:
                await asyncio.sleep(0.01)
        await asyncio.to_thread(server.stop, kill=True)
        with pytest.raises(httpx.HTTPError):
            await request
    assert server.process.returncode == -9


async def test_a_kill_during_a_remember_and_a_retry_leave_one_record(
    tmp_path: Path, mem0_over_http: tuple[FakeMem0, str]
) -> None:
    """Killed while mem0 held its add, the gateway restarts; the client's retry answers 201 with the record
    mem0 stored, and mem0 holds that one record."""
    fake, url = mem0_over_http
    config = write_config(tmp_path, url)
    first = await serve(tmp_path, config, fake)
    admin = httpx.AsyncClient(base_url=first.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    memory = (await admin.post("/v1/memories", json={"name": "Customer 7", "provider": "m0"})).json()["id"]
    await admin.aclose()
    fake.fail("hold", when=lambda r: r.method == "POST" and r.url.path == "/memories")
    body = {"content": "Acme renews in March"}
    await killed_while_sending(first, fake, f"/v1/memories/{memory}/records", body, "crash-remember")

    second = await serve(tmp_path, config, fake)
    try:
        async with httpx.AsyncClient(base_url=second.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                     timeout=30) as client:
            retried = await client.post(f"/v1/memories/{memory}/records", json=body,
                                        headers={"Idempotency-Key": "crash-remember"})
    finally:
        await asyncio.to_thread(second.stop)
    assert retried.status_code == 201, retried.text
    assert adds(fake) == 1
    [stored] = fake.memories.values()
    assert retried.json()["id"] == "hrec_" + stored["id"]


async def test_a_kill_during_an_observe_and_a_retry_leave_one_episode(
    tmp_path: Path, mem0_over_http: tuple[FakeMem0, str]
) -> None:
    """Killed while mem0 held the episode, the gateway restarts; the client's retry answers with the first
    request's job instead of a new one, the restarted gateway's worker finds the episode at mem0 by its
    outbox id, and mem0 holds one episode, which the job names."""
    fake, url = mem0_over_http
    config = write_config(tmp_path, url)
    first = await serve(tmp_path, config, fake)
    admin = httpx.AsyncClient(base_url=first.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    memory = (await admin.post("/v1/memories", json={"name": "Customer 7", "provider": "m0"})).json()["id"]
    await admin.aclose()
    fake.fail("hold", when=lambda r: r.method == "POST" and r.url.path == "/memories")
    await killed_while_sending(first, fake, f"/v1/memories/{memory}/observe", {"content": TURN}, "crash-observe")

    second = await serve(tmp_path, config, fake)
    try:
        async with httpx.AsyncClient(base_url=second.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                     timeout=30) as client:
            retried = await client.post(f"/v1/memories/{memory}/observe", json={"content": TURN},
                                        headers={"Idempotency-Key": "crash-observe"})
            assert retried.status_code in (201, 202), retried.text
            job_id = retried.json()["job"]["id"] if retried.status_code == 202 else None
            if job_id is not None:
                async with asyncio.timeout(60):
                    while True:
                        job = (await client.get(f"/v1/memories/{memory}/jobs/{job_id}")).json()
                        if job["status"] != "pending":
                            break
                        await asyncio.sleep(0.2)
                assert job["status"] == "completed", job
                assert len(job["record_ids"]) == 1
    finally:
        await asyncio.to_thread(second.stop)
    assert adds(fake) == 1
    assert len(fake.memories) == 1
