"""The gateway over the SaaS memory API faked at the HTTP layer, beside the local provider and a mem0 OSS
server: one recall across all three from the root, provider swaps and export/import both ways, the
vendor's limits answered as refusals naming their cause, a 429's Retry-After honoured by the breaker, and
observe through the vendor's ingest jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.adapters.fake_saas import BASE_URL, KEY, FakeSaas
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.migration_data import aliases, comparable, export_lines, held_by, migrate, seed

SAAS_ENV = "MEMFED_TEST_SAAS_KEY"
MEM0_ENV = "MEMFED_TEST_MEM0_KEY"


@dataclass
class Vendors:
    saas: FakeSaas
    mem0: FakeMem0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == httpx.URL(BASE_URL).host:
            return await self.saas.respond(request)
        answer: httpx.Response = await self.mem0.respond(request)
        return answer


async def _gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   **saas: Any) -> AsyncIterator[tuple[Gateway, Vendors]]:
    vendors = Vendors(FakeSaas(), FakeMem0("oss"))
    monkeypatch.setenv(SAAS_ENV, KEY)
    monkeypatch.setenv(MEM0_ENV, vendors.mem0.api_key or "")
    config = make_config(tmp_path, providers={
        "saas": {"adapter": "saas", "base_url": BASE_URL, "api_key_env": SAAS_ENV, "app_id": "memfed-test",
                 "ingest_poll": 0, **saas},
        "m0": {"adapter": "mem0", "variant": "oss", "base_url": vendors.mem0.base_url, "api_key_env": MEM0_ENV},
    })
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendors.handle))
    async with running_gateway(config, http_client=client) as gw:
        yield gw, vendors


@pytest.fixture
async def three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, Vendors]]:
    async for pair in _gateway(tmp_path, monkeypatch):
        yield pair


@pytest.fixture
async def deriving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, Vendors]]:
    async for pair in _gateway(tmp_path, monkeypatch, derivation="agent"):
        yield pair


async def write(gw: Gateway, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
    made = await gw.admin.post(f"/v1/memories/{memory_id}/records", json=body)
    assert made.status_code == 201, made.text
    return dict(made.json())


# --------------------------------------------------------------------------- one tree, three providers


async def test_recall_from_the_root_ranks_local_mem0_and_saas_memories_as_one(three: tuple[Gateway, Vendors]) -> None:
    """A tree whose branches live on local, mem0 and the SaaS memory: one recall at the root returns one
    ranking holding each branch's record, each result naming its memory (the zep branch of the issue is
    another helper's adapter, not in this tree)."""
    gw, _ = three
    root = await gw.root("Company")
    branches = {name: await gw.child(gw.admin, root["id"], f"On {name}", provider=name)
                for name in ("local", "m0", "saas")}
    for name, memory in branches.items():
        await write(gw, memory["id"], {"type": "fact", "content": f"renewal terms kept on {name}"})
    await write(gw, branches["saas"]["id"], {"type": "fact", "content": "the coffee machine is broken"})

    answer = await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "renewal terms", "limit": 10})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    found = [(r["memory"]["id"], r["record"]["content"][0]["text"]) for r in body["results"]]
    assert {m for m, text in found if "renewal" in text} == {b["id"] for b in branches.values()}
    assert body["results"][0]["score"] == 1.0
    assert not any(d.startswith("provider:") and "emulated" not in d for d in body["degraded"])


# --------------------------------------------------------------------------- provider swap


async def test_a_round_trip_local_to_saas_and_back_keeps_every_version(three: tuple[Gateway, Vendors]) -> None:
    """local -> saas -> local: every version, writer, time, file part, reference and forgotten record of
    the seeded memory comes back as it left; on the way, the vendor held four chains in the memory's scope."""
    gw, vendors = three
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    there = await migrate(gw, seeded.memory_id, to="saas")
    assert there.status_code == 200, there.text
    on_saas = await aliases(gw, seeded.memory_id)
    assert comparable(await export_lines(gw.admin, seeded.memory_id),
                      id_map={v: k for k, v in on_saas.items()}) == comparable(before)
    assert len(await held_by(gw, "saas", seeded.memory_id)) == 4
    heads = [r for r in vendors.saas.records.values()
             if r["scope_id"] == "memfed-" + seeded.memory_id and r["superseded_by"] is None]
    assert len(heads) == 4
    back = await migrate(gw, seeded.memory_id, to="local")
    assert back.status_code == 200, back.text
    home = await aliases(gw, seeded.memory_id)
    assert comparable(await export_lines(gw.admin, seeded.memory_id),
                      id_map={v: k for k, v in home.items() if k in seeded.ids}) == comparable(before)


async def test_a_swap_from_mem0_to_saas_and_back_keeps_every_version(three: tuple[Gateway, Vendors]) -> None:
    """mem0 -> saas -> mem0, starting from the seeded memory moved to mem0 first: nothing is lost."""
    gw, _ = three
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    for target in ("m0", "saas", "m0"):
        answer = await migrate(gw, seeded.memory_id, to=target)
        assert answer.status_code == 200, answer.text
        moved = await aliases(gw, seeded.memory_id)
        current = {v: k for k, v in moved.items() if k in seeded.ids}
        assert comparable(await export_lines(gw.admin, seeded.memory_id), id_map=current) == comparable(before)


async def test_export_from_saas_imports_into_local_and_mem0_and_back(three: tuple[Gateway, Vendors]) -> None:
    """Exported from a saas memory, the lines import into memories on local and on mem0 whole, and an
    export from local imports into saas whole."""
    gw, _ = three
    seeded = await seed(gw)
    exported = await export_lines(gw.admin, seeded.memory_id)
    ndjson = "".join(json.dumps(line) + "\n" for line in exported)
    for provider in ("saas", "local", "m0"):
        target = await gw.root(f"Restore on {provider}", provider=provider)
        answer = await gw.admin.post(f"/v1/memories/{target['id']}/import", content=ndjson,
                                     headers={"Content-Type": "application/x-ndjson"})
        assert answer.status_code == 200, answer.text
        assert (answer.json()["imported"], answer.json()["degraded"]) == (4, [])
        new = await aliases(gw, target["id"])
        again = await export_lines(gw.admin, target["id"])
        assert comparable(again, id_map={v: k for k, v in new.items()},
                          memory_map={target["id"]: seeded.memory_id}) == comparable(exported)
        if provider == "saas":  # from here on, the source is the copy on saas
            exported = again
            ndjson = "".join(json.dumps(line) + "\n" for line in again)
            seeded.memory_id = target["id"]


# --------------------------------------------------------------------------- limits


async def test_the_record_cap_is_a_refusal_that_names_its_cause(three: tuple[Gateway, Vendors]) -> None:
    """At the tenant's record cap a write is 422 memory_unsupported naming record_cap_exceeded; nothing is
    stored or evicted, and the breaker stays closed (the vendor answered)."""
    gw, vendors = three
    memory = await gw.root("Capped", provider="saas")
    await write(gw, memory["id"], {"content": "one"})
    vendors.saas.cap = 1
    refused = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "two"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "memory_unsupported"
    assert "record_cap_exceeded" in refused.json()["error"]["message"]
    assert [r["content"] for r in vendors.saas.records.values()] == ["one"]
    assert gw.services.providers["saas"].breaker.state == "closed"


async def test_the_token_quota_is_a_refusal_that_names_its_cause(three: tuple[Gateway, Vendors]) -> None:
    """A store past the token quota is 422 naming token_quota_exceeded, and nothing is written."""
    gw, vendors = three
    memory = await gw.root("Metered", provider="saas")
    vendors.saas.token_quota = 3
    refused = await gw.admin.post(f"/v1/memories/{memory['id']}/records",
                                  json={"content": "far more words than the quota allows"})
    assert refused.status_code == 422, refused.text
    assert "token_quota_exceeded" in refused.json()["error"]["message"]
    assert vendors.saas.records == {}


async def test_a_429_opens_the_breaker_for_its_retry_after(three: tuple[Gateway, Vendors]) -> None:
    """A 429 with Retry-After: 7 is 503 rate_limited with Retry-After, and the breaker rests 7 seconds."""
    gw, vendors = three
    memory = await gw.root("Busy", provider="saas")
    vendors.saas.fail("429", retry_after=7)
    answer = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": "x"})
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["detail"] == {"provider": "saas", "reason": "rate_limited", "retry_after": 7}
    assert answer.headers["retry-after"] == "7"
    breaker = gw.services.providers["saas"].breaker
    assert (breaker.state, breaker.open_for) == ("open", 7)


# --------------------------------------------------------------------------- observe and ingest


async def test_observe_stores_the_episode_by_a_raw_ingest_job(three: tuple[Gateway, Vendors]) -> None:
    """An observed episode is a raw ingest job polled to its end: one episodic record holding the
    transcript, read back as the episode memfed stated; no smart job when the provider does not derive."""
    gw, vendors = three
    memory = await gw.root("Chats", provider="saas")
    observed = await gw.admin.post(f"/v1/memories/{memory['id']}/observe",
                                   json={"content": "The customer said the invoice address changed."})
    assert observed.status_code == 201, observed.text
    (record,) = observed.json()["records"]
    assert record["type"] == "episode"
    assert [b["mode"] for b in vendors.saas.bodies("POST", "/ingest")] == ["raw"]
    (stored,) = vendors.saas.records.values()
    assert (stored["kind"], stored["content"]) == ("episodic", "The customer said the invoice address changed.")
    assert all(job["status"] == "done" for job in vendors.saas.jobs.values())


async def test_a_deriving_provider_also_runs_a_smart_job(deriving: tuple[Gateway, Vendors]) -> None:
    """With derivation = "agent" (declared), the episode is kept by a raw job and a smart job stores the
    facts it extracts, which read back as written by the provider."""
    gw, vendors = deriving
    caps = (await gw.admin.get("/v1/memories/providers")).json()["data"]
    assert next(p for p in caps if p["id"] == "saas")["derivation"] == "agent"
    memory = await gw.root("Chats", provider="saas")
    observed = await gw.admin.post(f"/v1/memories/{memory['id']}/observe", json={
        "content": "Dana prefers email over phone calls. Can we call her? The invoice address changed in May."})
    assert observed.status_code == 201, observed.text
    assert [b["mode"] for b in vendors.saas.bodies("POST", "/ingest")] == ["raw", "smart"]
    listed = (await gw.admin.get(f"/v1/memories/{memory['id']}/records")).json()["data"]
    derived = sorted(r["content"][0]["text"] for r in listed if r["written_by"]["kind"] == "provider")
    assert derived == ["Dana prefers email over phone calls.", "The invoice address changed in May."]


async def test_an_attribute_the_vendor_cannot_hold_is_the_callers_422(three: tuple[Gateway, Vendors]) -> None:
    """attributes.importance outside 0..1 or an unknown tier is the caller's mistake: 422 memory_invalid
    in the error envelope, nothing sent to the vendor, never a 500 nor a provider failure."""
    gw, vendors = three
    memory = await gw.root("Ranked", provider="saas")
    for attributes in ({"importance": 5}, {"tier": "platinum"}):
        answer = await gw.admin.post(f"/v1/memories/{memory['id']}/records",
                                     json={"content": "x", "attributes": attributes})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "memory_invalid"
    assert vendors.saas.records == {} and vendors.saas.bodies("POST", "/records") == []
    assert gw.services.providers["saas"].breaker.failures == 0


async def test_forgotten_records_come_back_only_with_include_all(three: tuple[Gateway, Vendors]) -> None:
    """A forgotten saas record (expired at the vendor) leaves recall, and `include: all` brings it back
    marked forgotten."""
    gw, _ = three
    memory = await gw.root("Forgetful", provider="saas")
    gone = await write(gw, memory["id"], {"type": "fact", "content": "Acme renews in March"})
    assert (await gw.admin.delete(f"/v1/memories/{memory['id']}/records/{gone['id']}")).status_code == 200
    url = f"/v1/memories/{memory['id']}/recall"
    assert (await gw.admin.post(url, json={"text": "Acme"})).json()["results"] == []
    shown = (await gw.admin.post(url, json={"text": "Acme", "include": "all"})).json()["results"]
    assert [(r["record"]["id"], r["record"]["status"]) for r in shown] == [(gone["id"], "forgotten")]


async def test_deleting_a_saas_memory_forgets_its_scope_only(three: tuple[Gateway, Vendors]) -> None:
    """DELETE of a memory on saas is one bulk forget naming its scope, actor and app; the sibling memory's
    records stay, and erase of a record removes its whole chain at the vendor."""
    gw, vendors = three
    root = await gw.root("Company", provider="saas")
    doomed = await gw.child(gw.admin, root["id"], "Doomed")
    kept = await write(gw, root["id"], {"content": "stays"})
    for i in range(3):
        await write(gw, doomed["id"], {"content": f"goes {i}"})
    assert (await gw.admin.delete(f"/v1/memories/{doomed['id']}")).status_code == 200
    scope = "memfed-" + doomed["id"]
    assert vendors.saas.bodies("POST", "/forget") == [{"scope_id": scope, "actor_id": scope, "app_id": "memfed-test"}]
    assert [r["content"] for r in vendors.saas.records.values()] == ["stays"]
    revised = await gw.admin.patch(f"/v1/memories/{root['id']}/records/{kept['id']}", json={"content": "v2"})
    assert revised.status_code == 200, revised.text
    erased = await gw.admin.post(f"/v1/memories/{root['id']}/erase", json={"record_ids": [kept["id"]]})
    assert erased.status_code == 200 and erased.json()["erased"] == [kept["id"]], erased.text
    assert erased.json()["unreachable"] == [] and vendors.saas.records == {}


# --------------------------------------------------------------------------- vector search off at run time


async def test_vectors_off_at_run_time_say_query_emulated_by_the_documented_grammar(
        three: tuple[Gateway, Vendors]) -> None:
    """Configured with vector search on, the vendor starts answering `embedding: false`: the recall says
    `provider:saas:query:emulated` (the one grammar of docs/degraded.md), and the
    capability document now declares `query` emulated; when the vendor embeds again, both say so."""
    gw, vendors = three
    memory = await gw.root("Vectors", provider="saas")
    await write(gw, memory["id"], {"type": "fact", "content": "Acme renews in March"})
    url = f"/v1/memories/{memory['id']}/recall"

    def emulated() -> list[str]:
        return list(next(p for p in caps.json()["data"] if p["id"] == "saas")["recall"]["emulated"])

    vendors.saas.embedding = False
    body = (await gw.admin.post(url, json={"query": "Acme renews"})).json()
    assert [r["record"]["content"][0]["text"] for r in body["results"]] == ["Acme renews in March"]
    assert "provider:saas:query:emulated" in body["degraded"]
    caps = await gw.admin.get("/v1/memories/providers")
    assert emulated() == ["query", "text"]

    vendors.saas.embedding = True
    body = (await gw.admin.post(url, json={"query": "Acme renews"})).json()
    assert not [d for d in body["degraded"] if "query" in d]
    caps = await gw.admin.get("/v1/memories/providers")
    assert emulated() == ["text"]
