"""The gateway over Zep faked at the HTTP layer, beside the embedded provider and a mem0 OSS fake: one
recall across the three, Zep's derived facts marked, a slow Zep degrading rather than failing, observe
jobs that finish when Zep has processed the episode, the graph read from Zep's own graph, 429s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api._gateway import Gateway
from tests.api.zep_data import Three, three_providers


@pytest.fixture
async def three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Three]:
    async with three_providers(tmp_path, monkeypatch) as made:
        yield made


async def remember(gw: Gateway, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
    made = await gw.admin.post(f"/v1/memories/{memory_id}/records", json=body)
    assert made.status_code == 201, made.text
    return made.json()


async def branches(gw: Gateway) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    root = await gw.root("Company")
    made = {name: await gw.child(gw.admin, root["id"], name, provider=name) for name in ("local", "m0", "zep")}
    return root, made


# --------------------------------------------------------------------------- one recall over three vendors


async def test_one_recall_ranks_local_mem0_and_zep_and_marks_what_zep_derived(three: Three) -> None:
    """A tree whose branches live on local, mem0 and Zep, recalled from the root: one ranking naming each
    result's memory; the facts Zep derived from an episode come back written by the provider."""
    gw = three.gw
    root, made = await branches(gw)
    for name, memory in made.items():
        await remember(gw, memory["id"], {"type": "fact", "content": f"Acme renews in March ({name})."})
    observed = await gw.admin.post(f"/v1/memories/{made['zep']['id']}/observe",
                                   json={"content": "Acme renews with Globex."})
    assert observed.status_code == 202, observed.text
    three.zep.process()

    body = (await gw.admin.post(f"/v1/memories/{root['id']}/recall",
                                json={"query": "Acme renews", "limit": 20})).json()

    places = {r["memory"]["id"] for r in body["results"]}
    assert places == {m["id"] for m in made.values()}
    on_zep = [r for r in body["results"] if r["memory"]["id"] == made["zep"]["id"]]
    writers = {r["record"]["written_by"]["kind"] for r in on_zep}
    assert writers == {"member", "provider"}
    derived = [r for r in on_zep if r["record"]["written_by"]["kind"] == "provider"]
    assert derived and all(r["record"]["written_by"]["id"] == "zep" for r in derived)
    assert not [d for d in body["degraded"] if d.startswith("provider:") and not d.endswith(":emulated")]


async def test_a_zep_slower_than_its_timeout_degrades_the_recall_but_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zep fake slowed past its timeout: 200, the other branches' results, provider:zep:timeout."""
    async with three_providers(tmp_path, monkeypatch, zep_timeout=0.2) as made3:
        gw = made3.gw
        root, made = await branches(gw)
        for name, memory in made.items():
            await remember(gw, memory["id"], {"content": f"Acme renews in March ({name})."})
        made3.zep.latency = 0.5

        answer = await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"query": "Acme renews"})

    assert answer.status_code == 200
    body = answer.json()
    assert "provider:zep:timeout" in body["degraded"]
    assert {r["memory"]["id"] for r in body["results"]} == {made["local"]["id"], made["m0"]["id"]}


# --------------------------------------------------------------------------- observe and derivation


async def test_an_observe_job_completes_only_once_zep_has_processed_the_episode(three: Three) -> None:
    gw = three.gw
    memory = await gw.root("Support", provider="zep")
    observed = await gw.admin.post(f"/v1/memories/{memory['id']}/observe", json={"content": "Dana moved to Berlin."})
    assert observed.status_code == 202, observed.text
    job = observed.json()["job"]["id"]

    before = (await gw.admin.get(f"/v1/memories/{memory['id']}/jobs/{job}")).json()
    three.zep.process()
    after = (await gw.admin.get(f"/v1/memories/{memory['id']}/jobs/{job}")).json()

    assert before["status"] == "pending" and before["x.memfed"]["derivation"] == "pending"
    assert after["status"] == "completed" and len(after["record_ids"]) == 1
    assert capabilities(await gw.admin.get("/v1/memories/providers"), "zep")["derivation"] == "background"


def capabilities(answer: httpx.Response, name: str) -> dict[str, Any]:
    return next(p for p in answer.json()["data"] if p["id"] == name)


# --------------------------------------------------------------------------- the graph read


async def test_the_graph_read_answers_from_zeps_own_graph(three: Three) -> None:
    """Around an entity, the graph read asks Zep's subgraph and shows the fact joining it to another."""
    gw = three.gw
    memory = await gw.root("People", provider="zep")
    mid = memory["id"]
    ada = await remember(gw, mid, {"type": "entity", "title": "Ada", "content": "Ada."})
    acme = await remember(gw, mid, {"type": "entity", "title": "Acme", "content": "Acme."})
    await remember(gw, mid, {"type": "entity", "title": "Far", "content": "Unrelated."})
    fact = await remember(gw, mid, {"type": "fact", "content": "Ada works at Acme.", "references": [
        {"memory_id": mid, "record_id": ada["id"], "rel": "subject"},
        {"memory_id": mid, "record_id": acme["id"], "rel": "object"}]})
    three.zep.requests.clear()

    graph = (await gw.admin.post(f"/v1/memories/{mid}/graph", json={"around": ada["id"], "hops": 2})).json()

    assert any(r.url.path.endswith("/subgraph") for r in three.zep.requests)
    assert {n["record"]["id"] for n in graph["nodes"]} == {ada["id"], acme["id"], fact["id"]}
    assert {(e["from"]["record_id"], e["to"]["record_id"], e["rel"]) for e in graph["edges"]} == {
        (fact["id"], ada["id"], "subject"), (fact["id"], acme["id"], "object")}


# --------------------------------------------------------------------------- rate limits


async def test_zeps_429_opens_the_breaker_for_as_long_as_retry_after_says(three: Three) -> None:
    gw = three.gw
    memory = await gw.root("Busy", provider="zep")
    await remember(gw, memory["id"], {"content": "Anything at all."})
    three.zep.fail("429", times=100)

    first = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={"query": "anything"})).json()
    second = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={"query": "anything"})).json()

    assert "provider:zep:rate_limited" in first["degraded"]
    assert "provider:zep:circuit_open" in second["degraded"]
    breaker = gw.services.providers["zep"].breaker
    assert breaker.open_for == 60


async def test_filters_on_a_zep_memory_are_judged_by_memfed_and_said_so(three: Three) -> None:
    """Zep cannot judge memfed's fields: the filter is applied by memfed on the graph's listing, the
    answer holds only what matches, and degraded says the signal was emulated."""
    gw = three.gw
    memory = await gw.root("Accounts", provider="zep")
    acme = await remember(gw, memory["id"], {"content": "Renews in March.", "attributes": {"account": "acme"}})
    await remember(gw, memory["id"], {"content": "Renews in May.", "attributes": {"account": "globex"}})

    body = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={
        "filters": {"field": "attributes.account", "op": "eq", "value": "acme"}})).json()

    assert [r["record"]["id"] for r in body["results"]] == [acme["id"]]
    assert "provider:zep:filters:emulated" in body["degraded"]


async def test_filters_zep_judges_are_not_said_emulated_and_the_rest_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `filter_attributes = ["account"]`, a recall by `type` and `attributes.account` is judged by
    Zep (v4 metadata_filters) and memfed: no emulation said for zep; adding `attributes.region` names that
    field alone (once, over the two zep memories asked one by one); the providers document says per field
    what Zep judges."""
    async with three_providers(tmp_path, monkeypatch, zep_options={"filter_attributes": ["account"]}) as made:
        gw = made.gw
        memory = await gw.root("Accounts", provider="zep")
        acme = await remember(gw, memory["id"], {"content": "Renews in March.",
                                                 "attributes": {"account": "acme", "region": "eu"}})
        await remember(gw, memory["id"], {"content": "Renews in May.", "attributes": {"account": "globex"}})
        # a second zep memory below: the recall asks zep once per memory and merges what each judged
        await gw.child(gw.admin, memory["id"], "Leads", provider="zep")
        asked = [{"field": "type", "op": "in", "value": ["note"]},
                 {"field": "attributes.account", "op": "eq", "value": "acme"}]
        sent = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={"filters": asked})).json()
        mixed = (await gw.admin.post(f"/v1/memories/{memory['id']}/recall", json={"filters": [
            *asked, {"field": "attributes.region", "op": "eq", "value": "eu"}]})).json()
        documents = (await gw.admin.get("/v1/memories/providers")).json()["data"]
    assert [r["record"]["id"] for r in sent["results"]] == [acme["id"]] == [r["record"]["id"] for r in mixed["results"]]
    assert not [d for d in sent["degraded"] if d.startswith("provider:zep:")]
    assert [d for d in mixed["degraded"] if d.startswith("provider:zep:")] == [
        "provider:zep:filters.attributes.region:emulated"]
    zep = next(d for d in documents if d["id"] == "zep")
    assert zep["x.memfed"]["filters"]["attributes.account"] == "native" and "filters" not in zep["recall"]["emulated"]
