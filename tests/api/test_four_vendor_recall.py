"""One tree whose branches live on the embedded provider, a mem0 OSS server, Zep v4 and the SaaS memory API,
each vendor faked at the HTTP layer behind one client that routes by host: a recall at the root is one
ranking over all four, each result naming the memory that holds it (issue 15, "a recall over local, mem0,
zep and saas memories from one root")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.adapters.fake_saas import BASE_URL as SAAS_URL
from tests.adapters.fake_saas import KEY as SAAS_KEY
from tests.adapters.fake_saas import FakeSaas
from tests.adapters.fake_zep import FakeZep
from tests.api._gateway import Gateway, make_config, running_gateway

ENV = {"saas": "MEMFED_TEST_SAAS_KEY", "m0": "MEMFED_TEST_MEM0_KEY", "zep": "MEMFED_TEST_ZEP_KEY"}
PROVIDERS = ("local", "m0", "zep", "saas")


@dataclass
class Vendors:
    mem0: FakeMem0
    zep: FakeZep
    saas: FakeSaas

    async def respond(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host == httpx.URL(SAAS_URL).host:
            return await self.saas.respond(request)
        if host == httpx.URL(self.zep.base_url).host:
            answer: httpx.Response = await self.zep.respond(request)
            return answer
        answer = await self.mem0.respond(request)
        return answer


@dataclass
class Four:
    gw: Gateway
    vendors: Vendors

    @property
    def mem0(self) -> FakeMem0:
        return self.vendors.mem0

    @property
    def zep(self) -> FakeZep:
        return self.vendors.zep

    @property
    def saas(self) -> FakeSaas:
        return self.vendors.saas


@pytest.fixture
async def four(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Four]:
    vendors = Vendors(FakeMem0("oss"), FakeZep("v4"), FakeSaas())
    monkeypatch.setenv(ENV["saas"], SAAS_KEY)
    monkeypatch.setenv(ENV["m0"], vendors.mem0.api_key or "")
    monkeypatch.setenv(ENV["zep"], vendors.zep.api_key)
    config = make_config(tmp_path, providers={
        "m0": {"adapter": "mem0", "variant": "oss", "base_url": vendors.mem0.base_url, "api_key_env": ENV["m0"]},
        "zep": {"adapter": "zep", "base_url": vendors.zep.base_url, "api_key_env": ENV["zep"], "task_poll": 0.001},
        "saas": {"adapter": "saas", "base_url": SAAS_URL, "api_key_env": ENV["saas"], "app_id": "memfed-test",
                 "ingest_poll": 0},
    })
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendors.respond))
    async with running_gateway(config, http_client=client) as gw:
        yield Four(gw, vendors)


async def remember(gw: Gateway, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
    made = await gw.admin.post(f"/v1/memories/{memory_id}/records", json=body)
    assert made.status_code == 201, made.text
    return dict(made.json())


async def test_one_recall_at_the_root_ranks_local_mem0_zep_and_saas_as_one(four: Four) -> None:
    """Each of the four branches holds one matching fact and the saas branch one that does not match: the
    root's recall is one ranking (scores descending, the best 1.0) whose matching results are exactly the
    four facts, each named by the memory that holds it, and no provider is reported failing."""
    gw = four.gw
    root = await gw.root("Company")
    branches = {name: await gw.child(gw.admin, root["id"], f"On {name}", provider=name) for name in PROVIDERS}
    written = {name: await remember(gw, memory["id"], {"type": "fact", "content": f"Acme renews in March ({name})"})
               for name, memory in branches.items()}
    await remember(gw, branches["saas"]["id"], {"type": "fact", "content": "the coffee machine is broken"})

    asked_before = (len(four.mem0.requests), len(four.zep.requests), len(four.saas.bodies("POST", "/recall")))
    answer = await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "Acme renews", "limit": 20})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    matching = {(r["memory"]["id"], r["record"]["id"]) for r in body["results"]
                if "Acme renews" in r["record"]["content"][0]["text"]}
    assert matching == {(branches[name]["id"], written[name]["id"]) for name in PROVIDERS}
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert {r["memory"]["id"] for r in body["results"]} <= {b["id"] for b in branches.values()}
    assert not [d for d in body["degraded"] if d.startswith("provider:") and "emulated" not in d]
    asked_after = (len(four.mem0.requests), len(four.zep.requests), len(four.saas.bodies("POST", "/recall")))
    assert all(after > before for before, after in zip(asked_before, asked_after, strict=True))  # each vendor searched
