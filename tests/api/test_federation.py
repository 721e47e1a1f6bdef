"""Federation: one recall across heterogeneous providers, with slow, failing and rate-limited vendors.

The gateway runs in-process with three providers besides the embedded one: mem0 Platform, mem0 OSS, and
a second mem0 OSS host that answers too slowly. Vendors are faked at the HTTP layer (tests/adapters/
fake_mem0.py), reached through the gateway's one injected httpx client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import OSS_URL, PLATFORM_URL, FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

PLATFORM_KEY = "m0-platform-SECRET-1111"
OSS_KEY = "m0-oss-SECRET-2222"
SLOW_URL = "http://slow-mem0.test:8888"


@dataclass
class Vendors:
    cloud: FakeMem0
    selfhosted: FakeMem0
    slow: FakeMem0
    slow_seconds: float = 3.0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host == httpx.URL(SLOW_URL).host:
            await asyncio.sleep(self.slow_seconds)
            return await self.slow.respond(request)
        if host == httpx.URL(PLATFORM_URL).host:
            return await self.cloud.respond(request)
        return await self.selfhosted.respond(request)


@pytest.fixture
async def federated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, Vendors]]:
    monkeypatch.setenv("TEST_MEM0_PLATFORM_KEY", PLATFORM_KEY)
    monkeypatch.setenv("TEST_MEM0_OSS_KEY", OSS_KEY)
    vendors = Vendors(FakeMem0("platform", PLATFORM_KEY), FakeMem0("oss", OSS_KEY), FakeMem0("oss", OSS_KEY))
    config = make_config(tmp_path, providers={
        "cloud": {"adapter": "mem0", "variant": "platform", "base_url": PLATFORM_URL,
                  "api_key_env": "TEST_MEM0_PLATFORM_KEY", "timeout": 1.0, "failure_threshold": 3,
                  "reset_after": 0.3},
        "selfhosted": {"adapter": "mem0", "variant": "oss", "base_url": OSS_URL,
                       "api_key_env": "TEST_MEM0_OSS_KEY", "timeout": 1.0},
        "slow": {"adapter": "mem0", "variant": "oss", "base_url": SLOW_URL, "api_key_env": "TEST_MEM0_OSS_KEY",
                 "timeout": 0.3},
    })
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendors.handle))
    async with running_gateway(config, http_client=client) as gw:
        yield gw, vendors


async def _branches(gw: Gateway, vendors: Vendors) -> dict[str, Any]:
    root = await gw.root("Company")
    made = {"root": root}
    for name in ("local", "cloud", "selfhosted", "slow"):
        made[name] = await gw.child(gw.admin, root["id"], f"On {name}", provider=name)
    vendors.slow_seconds = 0.0
    for name in ("local", "cloud", "selfhosted", "slow"):
        answer = await gw.admin.post(f"/v1/memories/{made[name]['id']}/records",
                                     json={"type": "fact", "content": f"renewal terms kept on {name}"})
        assert answer.status_code == 201, answer.text
    vendors.slow_seconds = 3.0
    return made


async def test_recall_from_the_root_reaches_every_provider(federated: tuple[Gateway, Vendors]) -> None:
    """One recall at the root returns the records of all healthy providers as one ranking."""
    gw, vendors = federated
    made = await _branches(gw, vendors)
    vendors.slow_seconds = 0.0
    body = (await gw.admin.post(f"/v1/memories/{made['root']['id']}/recall",
                                json={"query": "renewal terms", "limit": 10})).json()
    places = {r["memory"]["id"] for r in body["results"]}
    assert places == {made[n]["id"] for n in ("local", "cloud", "selfhosted", "slow")}
    assert all(0 <= r["score"] <= 1 for r in body["results"])
    assert body["results"][0]["score"] == 1.0
    assert not any(d.startswith("provider:") and "emulated" not in d for d in body["degraded"])


async def test_a_slow_and_a_failing_provider_degrade_the_answer(federated: tuple[Gateway, Vendors]) -> None:
    """With one provider past its timeout and another failing, the answer is 200 with the healthy results
    and names the others in degraded."""
    gw, vendors = federated
    made = await _branches(gw, vendors)
    vendors.cloud.fail("500", times=10)
    answer = await gw.admin.post(f"/v1/memories/{made['root']['id']}/recall", json={"query": "renewal terms"})
    assert answer.status_code == 200
    body = answer.json()
    assert {r["memory"]["id"] for r in body["results"]} == {made["local"]["id"], made["selfhosted"]["id"]}
    assert "provider:slow:timeout" in body["degraded"]
    assert "provider:cloud:unavailable" in body["degraded"]


async def test_a_signal_one_provider_lacks_is_named_for_that_provider(federated: tuple[Gateway, Vendors]) -> None:
    """text is searched where it is declared and reported for each provider without it."""
    gw, vendors = federated
    made = await _branches(gw, vendors)
    vendors.slow_seconds = 0.0
    body = (await gw.admin.post(f"/v1/memories/{made['root']['id']}/recall", json={"text": "renewal"})).json()
    assert {r["memory"]["id"] for r in body["results"]} == {made["local"]["id"]}
    for name in ("cloud", "selfhosted", "slow"):
        assert f"provider:{name}:text:not_supported" in body["degraded"]


async def test_one_call_per_provider_that_searches_many_memories(federated: tuple[Gateway, Vendors]) -> None:
    """mem0 Platform is asked once for all its memories; OSS, which cannot, once per memory."""
    gw, vendors = federated
    root = await gw.root("R")
    cloud = [await gw.child(gw.admin, root["id"], f"c{i}", provider="cloud") for i in range(3)]
    oss = [await gw.child(gw.admin, root["id"], f"o{i}", provider="selfhosted") for i in range(3)]
    for memory in cloud + oss:
        await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "shared words"})
    vendors.cloud.requests.clear()
    vendors.selfhosted.requests.clear()
    await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "shared words"})
    searches_cloud = [r for r in vendors.cloud.requests if "search" in r.url.path]
    searches_oss = [r for r in vendors.selfhosted.requests if "search" in r.url.path]
    assert len(searches_cloud) == 1
    assert len(searches_oss) == 3


async def test_the_breaker_opens_rests_and_probes(federated: tuple[Gateway, Vendors]) -> None:
    """After repeated failures the provider is not called; its state shows open; after a rest one probe
    goes through and closes it again."""
    gw, vendors = federated
    now = [1000.0]  # the breaker's clock, moved on by hand: a loaded machine cannot outlast a 0.3 s rest
    gw.services.providers.handles["cloud"].breaker.clock = lambda: now[0]
    root = await gw.root("R")
    cloud = await gw.child(gw.admin, root["id"], "c", provider="cloud")
    vendors.cloud.fail("500", times=100)
    for _ in range(3):
        await gw.admin.post(f"/v1/memories/{cloud['id']}/recall", json={"query": "x"})
    state = {p["id"]: p["x.memfed"]["breaker"]["state"]
             for p in (await gw.admin.get("/v1/memories/providers")).json()["data"]}
    assert state["cloud"] == "open"
    calls_before = len(vendors.cloud.requests)
    resting = (await gw.admin.post(f"/v1/memories/{cloud['id']}/recall", json={"query": "x"})).json()
    assert "provider:cloud:circuit_open" in resting["degraded"]
    assert len(vendors.cloud.requests) == calls_before
    vendors.cloud._failures.clear()
    now[0] += 0.35
    probed = (await gw.admin.post(f"/v1/memories/{cloud['id']}/recall", json={"query": "x"})).json()
    assert not any("cloud" in d for d in probed["degraded"])
    state = {p["id"]: p["x.memfed"]["breaker"]["state"]
             for p in (await gw.admin.get("/v1/memories/providers")).json()["data"]}
    assert state["cloud"] == "closed"


async def test_rate_limited_provider_honours_retry_after(federated: tuple[Gateway, Vendors]) -> None:
    """A 429 with Retry-After is reported as rate_limited and the provider rests for that long."""
    gw, vendors = federated
    root = await gw.root("R")
    cloud = await gw.child(gw.admin, root["id"], "c", provider="cloud")
    vendors.cloud.fail("429", times=1, retry_after="30")
    first = (await gw.admin.post(f"/v1/memories/{cloud['id']}/recall", json={"query": "x"})).json()
    assert "provider:cloud:rate_limited" in first["degraded"]
    second = (await gw.admin.post(f"/v1/memories/{cloud['id']}/recall", json={"query": "x"})).json()
    assert "provider:cloud:circuit_open" in second["degraded"]


async def test_a_write_to_a_failing_provider_is_an_error_not_a_silent_loss(
        federated: tuple[Gateway, Vendors]) -> None:
    """remember on a failing provider answers 503 memory_unavailable and is not retried; a 5xx may have
    been applied, so the gateway looked for the write (a read) and says its outcome is unknown."""
    gw, vendors = federated
    root = await gw.root("R")
    cloud = await gw.child(gw.admin, root["id"], "c", provider="cloud")
    vendors.cloud.fail("500", times=1)

    def adds() -> int:
        return len([r for r in vendors.cloud.requests if r.url.path == "/v3/memories/add/"])

    adds_before = adds()
    answer = await gw.admin.post(f"/v1/memories/{cloud['id']}/records", json={"content": "important"})
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "memory_unavailable"
    assert answer.json()["error"]["detail"]["outcome"] == "unknown"
    assert adds() == adds_before + 1


async def test_vendor_keys_never_reach_a_response_or_a_log(federated: tuple[Gateway, Vendors],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Across writes, recalls, failures and the providers document, no vendor key is answered or logged."""
    gw, vendors = federated
    caplog.set_level(logging.DEBUG)
    made = await _branches(gw, vendors)
    vendors.cloud.fail("500", times=2)
    vendors.selfhosted.fail("garbage", times=2)
    texts = [
        (await gw.admin.post(f"/v1/memories/{made['root']['id']}/recall", json={"query": "renewal"})).text,
        (await gw.admin.get("/v1/memories/providers")).text,
        (await gw.admin.post(f"/v1/memories/{made['cloud']['id']}/records", json={"content": "x"})).text,
        (await gw.admin.get(f"/v1/memories/{made['selfhosted']['id']}/records")).text,
    ]
    logged = "\n".join(r.getMessage() + str(r.args) + str(r.exc_info) for r in caplog.records)
    for secret in (PLATFORM_KEY, OSS_KEY):
        assert all(secret not in text for text in texts)
        assert secret not in logged
    assert vendors.cloud.requests[0].headers["authorization"] == f"Token {PLATFORM_KEY}"


async def test_traces_name_providers_and_outcomes_but_never_a_key(federated: tuple[Gateway, Vendors]) -> None:
    """Each request and each provider call is a span; no span attribute or name carries a vendor key or a
    member's API key."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from gateway.telemetry import configure

    exporter = InMemorySpanExporter()
    configure("none", exporter)
    gw, vendors = federated
    made = await _branches(gw, vendors)
    vendors.cloud.fail("500", times=10)
    await gw.admin.post(f"/v1/memories/{made['root']['id']}/recall", json={"query": "renewal"})
    spans = exporter.get_finished_spans()
    provider_spans = [s for s in spans if s.name.startswith("provider ")]
    outcomes = {((s.attributes or {}).get("memfed.provider"), (s.attributes or {}).get("memfed.outcome"))
                for s in provider_spans}
    assert ("cloud", "unavailable") in outcomes
    assert ("local", "ok") in outcomes
    assert any(s.name.startswith("POST /v1/memories/") for s in spans)
    dumped = "\n".join(s.to_json() for s in spans)
    for secret in (PLATFORM_KEY, OSS_KEY, gw.admin_key):
        assert secret not in dumped
