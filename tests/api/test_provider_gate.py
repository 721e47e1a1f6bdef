"""A provider's gate and breaker are left clean by callers that go away (gateway/federation/breaker.py).

Requests cancelled while their call is at the vendor, or while they wait at the gate for a slot, give
their place back and say nothing of the vendor's health; a probe cancelled mid-way is given back, so the
next call probes. The vendor is a mem0 OSS server faked at the HTTP layer, with searches that hang.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import make_config, running_gateway

KEY_ENV = "MEMFED_TEST_GATE_MEM0_KEY"


async def test_cancelled_calls_and_waiters_give_their_places_back(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Six recalls on a provider with two slots: two at the vendor, four waiting at the gate; all six are
    cancelled. The gate holds nothing afterwards, the breaker counted nothing, and a recall after the
    vendor recovers is answered from it. Then, with the breaker half open, a cancelled probe is given
    back: the next recall probes, succeeds and closes the breaker."""
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    hang = asyncio.Event()
    arrived: list[httpx.Request] = []

    async def respond(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/search" and not hang.is_set():
            arrived.append(request)
            await asyncio.Event().wait()  # never answers: only a cancellation ends it
        return await fake.respond(request)

    config = make_config(tmp_path, recall={"deadline": 30}, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV,
        "timeout": 20, "concurrency": 2, "failure_threshold": 1, "reset_after": 0.1}})
    async with running_gateway(config, http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond))) as gw:
        memory = await gw.root("Acme", provider="m0")
        made = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "renewal terms"})
        assert made.status_code == 201, made.text
        url = f"/v1/memories/{memory['id']}/recall"
        handle = gw.services.providers["m0"]

        recalls = [asyncio.ensure_future(gw.admin.post(url, json={"query": "renewal"})) for _ in range(6)]
        while len(arrived) < 2:
            await asyncio.sleep(0.01)
        assert handle.gate.in_flight == 2
        for task in recalls:
            task.cancel()
        await asyncio.gather(*recalls, return_exceptions=True)
        assert handle.gate.in_flight == 0 and len(arrived) == 2
        assert handle.breaker.state == "closed" and handle.breaker.failures == 0

        hang.set()
        answered = (await gw.admin.post(url, json={"query": "renewal"})).json()
        assert [r["record"]["id"] for r in answered["results"]] == [made.json()["id"]]

        hang.clear()
        handle.breaker.failed()  # one fault opens it; after 0.1 s the next call is the probe
        await asyncio.sleep(0.15)
        probe = asyncio.ensure_future(gw.admin.post(url, json={"query": "renewal"}))
        while len(arrived) < 3:
            await asyncio.sleep(0.01)
        assert handle.breaker.probing
        probe.cancel()
        await asyncio.gather(probe, return_exceptions=True)
        assert not handle.breaker.probing and handle.gate.in_flight == 0
        hang.set()
        probed = (await gw.admin.post(url, json={"query": "renewal"})).json()
        assert probed["degraded"] == [] and len(probed["results"]) == 1
        assert handle.breaker.state == "closed"


async def test_a_member_flooding_a_provider_leaves_a_slot_to_another(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider with two slots; one member keeps both busy with six recalls, the other asks one. When
    a slot frees, it goes to the member holding fewer than its share (one), before the flooding member's
    four waiting recalls: the third search to reach the vendor is the other member's."""
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    arrived: list[str] = []
    release: list[asyncio.Event] = []

    async def respond(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/search":
            arrived.append(request.content.decode())
            gate = asyncio.Event()
            release.append(gate)
            await gate.wait()
        return await fake.respond(request)

    config = make_config(tmp_path, recall={"deadline": 30}, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV,
        "timeout": 20, "concurrency": 2}})
    async with running_gateway(config, http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond))) as gw:
        root = await gw.root("Company", provider="m0")
        flooded = await gw.child(gw.admin, root["id"], "Flooded")
        quiet_memory = await gw.child(gw.admin, root["id"], "Quiet")
        noisy_id, noisy = await gw.member("noisy", "agent")
        quiet_id, quiet = await gw.member("quiet", "agent")
        await gw.grant(flooded["id"], f"member:{noisy_id}", "read")
        await gw.grant(quiet_memory["id"], f"member:{quiet_id}", "read")

        floods = [asyncio.ensure_future(noisy.post(f"/v1/memories/{flooded['id']}/recall",
                                                   json={"query": f"flood {i}"})) for i in range(6)]
        while len(arrived) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the other four wait at the gate
        asked = asyncio.ensure_future(quiet.post(f"/v1/memories/{quiet_memory['id']}/recall",
                                                 json={"query": "quiet question"}))
        await asyncio.sleep(0.05)
        release[0].set()  # one of the flood's calls ends: its slot is free
        while len(arrived) < 3:
            await asyncio.sleep(0.01)
        assert "quiet question" in arrived[2]
        while not asked.done() or len(release) < 7 or not all(floods[i].done() for i in range(6)):
            for gate in release:
                gate.set()
            await asyncio.sleep(0.01)
        assert asked.result().status_code == 200
        assert all(f.result().status_code == 200 for f in floods)
        assert gw.services.providers["m0"].gate.in_flight == 0
