"""What a provider's breaker says names the real cause (issue 10 item 2).

A probe that fails is reported as what it did (`timeout`), not as the breaker it reopened; a breaker
resting after a vendor's 429 tells the caller how long (Retry-After) on every 503 `circuit_open`. The
vendor is a mem0 OSS server faked at the HTTP layer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import make_config, running_gateway

KEY_ENV = "MEMFED_TEST_BREAKER_MEM0_KEY"


async def test_a_probe_that_times_out_is_reported_as_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The breaker opens at one fault and rests 0.2 s. After the rest, the next recall's one probe times
    out: that recall says `provider:m0:timeout` (its retry, refused by the reopened breaker, is not the
    cause), and only the probe reached the vendor."""
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    searches: list[httpx.Request] = []

    async def slow_searches(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/search":
            searches.append(request)
            await asyncio.sleep(1.0)
        return await fake.respond(request)

    config = make_config(tmp_path, recall={"deadline": 2.0}, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV,
        "timeout": 0.2, "failure_threshold": 1, "reset_after": 0.2}})
    async with running_gateway(config, http_client=httpx.AsyncClient(transport=httpx.MockTransport(
            slow_searches))) as gw:
        memory = await gw.root("Acme", provider="m0")
        url = f"/v1/memories/{memory['id']}/recall"
        first = (await gw.admin.post(url, json={"query": "renewal"})).json()
        assert first["degraded"] == ["provider:m0:timeout"]
        assert gw.services.providers["m0"].breaker.state == "open"
        await asyncio.sleep(0.25)  # the rest is over: the next call is the probe
        probed = (await gw.admin.post(url, json={"query": "renewal"})).json()
        assert probed["degraded"] == ["provider:m0:timeout"], probed
        assert len(searches) == 2
        resting = (await gw.admin.post(url, json={"query": "renewal"})).json()
        assert resting["degraded"] == ["provider:m0:circuit_open"]
        assert len(searches) == 2


async def test_circuit_open_after_a_429_carries_retry_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vendor answers 429 with Retry-After: 30. The read is 503 `rate_limited` with Retry-After 30;
    the next read, refused by the resting breaker without a call, is 503 `circuit_open` with the rest
    that is left as Retry-After, in the header and in the envelope's detail."""
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV}})
    async with running_gateway(config, http_client=fake.client()) as gw:
        memory = await gw.root("Acme", provider="m0")
        made = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "renewal terms"})
        assert made.status_code == 201, made.text
        url = f"/v1/memories/{memory['id']}/records/{made.json()['id']}"
        fake.fail("429", retry_after="30")
        limited = await gw.admin.get(url)
        calls = len(fake.requests)
        resting = await gw.admin.get(url)

    assert limited.status_code == 503 and limited.json()["error"]["detail"]["reason"] == "rate_limited"
    assert limited.headers["retry-after"] == "30"
    assert resting.status_code == 503
    error = resting.json()["error"]
    assert error["code"] == "memory_unavailable" and error["detail"]["reason"] == "circuit_open"
    assert 29 <= int(resting.headers["retry-after"]) <= 30
    assert error["detail"]["retry_after"] == int(resting.headers["retry-after"])
    assert len(fake.requests) == calls  # turned away without a call
