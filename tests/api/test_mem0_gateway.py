"""The gateway over a mem0 OSS server faked at the HTTP layer: a refused credential, an erase that fails
part way, a memory mem0 cannot list whole, snapshots mem0 could never read, and counts that never stall
a recall nor feed a breaker."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.degraded import parse
from gateway.agent import outbox
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

KEY_ENV = "MEMFED_TEST_MEM0_KEY"


@pytest.fixture
async def m0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, FakeMem0]]:
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV,
        "failure_threshold": 3, "reset_after": 30}})
    async with running_gateway(config, http_client=fake.client()) as gateway:
        yield gateway, fake


async def remember(gw: Gateway, memory_id: str, text: str) -> dict[str, Any]:
    made = await gw.admin.post(f"/v1/memories/{memory_id}/records", json={"content": text})
    assert made.status_code == 201, made.text
    return made.json()


# --------------------------------------------------------------------------- a refused credential


async def test_a_refused_credential_is_memfeds_problem_said_once_and_nothing_is_lost(
    m0: tuple[Gateway, FakeMem0], caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong key: remember is 503 unauthorized (not the caller's 422), recall names
    provider:m0:unauthorized, observe keeps its episode for retry, the breaker counts it, and the log
    says it once, naming the provider and its variable, never the key. Fixed, the episode arrives."""
    gw, fake = m0
    memory = await gw.root("Acme", provider="m0")
    right_key, fake.api_key = fake.api_key, "the-server-now-wants-another-key"
    caplog.set_level(logging.INFO)

    refused = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "x"})
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "memory_unavailable"
    assert refused.json()["error"]["detail"] == {"provider": "m0", "reason": "unauthorized"}
    recalled = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={"query": "x"})).json()
    assert "provider:m0:unauthorized" in recalled["degraded"]
    observed = await gw.admin.post(f"/v1/memories/{memory['id']}/observe", json={"content": "an episode"})
    assert observed.status_code == 202, observed.text
    assert await outbox.pending_count(gw.services) == 1

    said = [r for r in caplog.records if r.levelno >= logging.ERROR and "credential" in r.getMessage()]
    assert len(said) == 1 and "m0" in said[0].getMessage() and KEY_ENV in said[0].getMessage()
    assert right_key and right_key not in caplog.text
    assert gw.services.providers["m0"].breaker.failures >= 1

    fake.api_key = right_key
    gw.services.providers["m0"].breaker.succeeded()
    await outbox.deliver_due(gw.services, ignore_schedule=True)
    assert await outbox.pending_count(gw.services) == 0
    assert [m["memory"] for m in fake.memories.values()] == ["an episode"]


# --------------------------------------------------------------------------- erase


async def test_an_erase_that_fails_part_way_says_what_it_erased(m0: tuple[Gateway, FakeMem0]) -> None:
    """Two of twelve deletes fail: 503, and the envelope names the ten erased (unreachable: mem0 keeps
    their history) and the two remaining; erasing those again finishes the job."""
    gw, fake = m0
    memory = await gw.root("Acme", provider="m0")
    made = [await remember(gw, memory["id"], f"record {i}") for i in range(12)]
    failing = {made[3]["id"], made[11]["id"]}
    fake.fail("500", times=2, when=lambda r: r.method == "DELETE" and "hrec_" + r.url.path.split("/")[-1] in failing)

    answer = await gw.admin.post(f"/v1/memories/{memory['id']}/erase", json={"record_ids": [r["id"] for r in made]})

    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "memory_unavailable" and error["detail"]["provider"] == "m0"
    assert set(error["detail"]["remaining"]) == failing
    assert set(error["detail"]["erased"]) == {r["id"] for r in made} - failing
    assert set(error["detail"]["unreachable"]) == set(error["detail"]["erased"])
    assert len(fake.memories) == 2
    again = await gw.admin.post(f"/v1/memories/{memory['id']}/erase", json={"record_ids": sorted(failing)})
    assert again.status_code == 200 and set(again.json()["erased"]) == failing and fake.memories == {}


# --------------------------------------------------------------------------- the listing limit


async def test_a_memory_mem0_cannot_list_whole_answers_alike_on_every_route(m0: tuple[Gateway, FakeMem0]) -> None:
    """Past the OSS server's listing limit, listing, export and migrate are all 422 memory_unsupported
    (the same cause, the same answer), recall names the reason, and a further write is refused alike."""
    gw, fake = m0
    memory = await gw.root("Big", provider="m0")
    for i in range(1000):
        fake.add_raw("memfed-" + memory["id"], f"written at mem0 directly {i}")
    listed = await gw.admin.get(f"/v1/memories/{memory['id']}/records")
    exported = await gw.admin.get(f"/v1/memories/{memory['id']}/export")
    moved = await gw.admin.post(f"/v1/memories/{memory['id']}/migrate", json={"to": "local"})
    written = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "one more"})
    for answer in (listed, exported, moved, written):
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "memory_unsupported"), answer.text
    recalled = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall",
                                    json={"filters": {"field": "type", "op": "eq", "value": "fact"}})).json()
    assert "provider:m0:record_limit" in recalled["degraded"]
    assert gw.services.store.tree.get(memory["id"]).provider == "m0"  # type: ignore[union-attr]


async def test_the_capability_document_declares_the_listing_limit(m0: tuple[Gateway, FakeMem0]) -> None:
    gw, _ = m0
    documents = {p["id"]: p for p in (await gw.admin.get("/v1/memories/providers")).json()["data"]}
    assert documents["m0"]["x.memfed"]["records_per_memory"] == 999
    assert documents["local"]["x.memfed"]["records_per_memory"] is None


# --------------------------------------------------------------------------- snapshots


async def test_a_snapshot_is_refused_where_as_of_can_never_read_it(m0: tuple[Gateway, FakeMem0]) -> None:
    """mem0 cannot read as_of: a snapshot of a mem0 memory is 422 memory_unsupported; on local it is made."""
    gw, _ = m0
    on_mem0 = await gw.root("On mem0", provider="m0")
    on_local = await gw.root("On local")
    refused = await gw.admin.post(f"/v1/memories/{on_mem0['id']}/snapshots", json={"name": "q4"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "memory_unsupported"
    assert (await gw.admin.get(f"/v1/memories/{on_mem0['id']}/snapshots")).json()["data"] == []
    assert (await gw.admin.post(f"/v1/memories/{on_local['id']}/snapshots", json={"name": "q4"})).status_code == 201


# --------------------------------------------------------------------------- counts


class HeldListings:
    """The fake's transport, with every OSS listing (what a count costs) held until released."""

    def __init__(self, fake: FakeMem0) -> None:
        self.fake = fake
        self.release = asyncio.Event()
        self.held = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/memories":
            self.held += 1
            await self.release.wait()
        return await self.fake.respond(request)


async def test_a_recall_never_waits_for_counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every count held at the vendor (and a provider timeout far longer than the test would wait),
    a recall over a root's many children still answers: counts left out and said so
    (children:counts_pending); once counted, they are shown."""
    fake = FakeMem0("oss")
    held = HeldListings(fake)
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV, "timeout": 60}})
    async with running_gateway(config, http_client=httpx.AsyncClient(transport=httpx.MockTransport(held))) as gw:
        root = await gw.root("Root")
        children = [await gw.child(gw.admin, root["id"], f"c{i}", provider="m0") for i in range(60)]
        await remember(gw, children[7]["id"], "the needle")
        gw.services.counts.forget_all()
        answer = await asyncio.wait_for(
            gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "needle"}), 10)
        body = answer.json()
        assert answer.status_code == 200 and [r["memory"]["id"] for r in body["results"]] == [children[7]["id"]]
        assert "children:counts_pending" in body["degraded"]
        assert all(c["records"]["count"] is None for c in body["children"])
        held.release.set()
        for _ in range(200):
            body = (await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "needle"})).json()
            if "children:counts_pending" not in body["degraded"]:
                break
            await asyncio.sleep(0.02)
        counts = {c["id"]: c["records"]["count"] for c in body["children"]}
        assert counts[children[7]["id"]] == 1 and sum(counts.values()) == 1


async def test_counting_never_feeds_a_breaker(m0: tuple[Gateway, FakeMem0]) -> None:
    """Every count fails at the vendor, recall after recall: the searches still answer and the breaker
    (threshold 3) stays closed."""
    gw, fake = m0
    root = await gw.root("Root")
    children = [await gw.child(gw.admin, root["id"], f"c{i}", provider="m0") for i in range(3)]
    await remember(gw, children[0]["id"], "the needle")
    fake.fail("500", times=10_000, when=lambda r: r.method == "GET" and r.url.path == "/memories")
    for _ in range(6):
        gw.services.counts.forget_all()
        body = (await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "needle"})).json()
        assert [r["memory"]["id"] for r in body["results"]] == [children[0]["id"]], body
        # No provider failed as a whole (an emulation note is scoped to its provider too).
        assert not any(parse(d).scope == "provider" and parse(d).subject is None for d in body["degraded"]), body
        await asyncio.sleep(0.05)  # the counts after the answer have run, and failed
    handle = gw.services.providers["m0"]
    assert handle.breaker.state == "closed" and handle.breaker.failures == 0
