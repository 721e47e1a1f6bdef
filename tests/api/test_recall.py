"""Recall (§6) and the graph (§6.6) on the embedded provider, through the API."""

from __future__ import annotations

from typing import Any

from tests.api._gateway import Gateway


async def _remember(gateway: Gateway, memory_id: str, text: str, **fields: Any) -> dict[str, Any]:
    made = await gateway.admin.post(f"/v1/memories/{memory_id}/records", json={"content": text, **fields})
    assert made.status_code == 201, made.text
    return made.json()


async def _tree(gateway: Gateway) -> dict[str, dict[str, Any]]:
    root = await gateway.root("Company", description="everything")
    sales = await gateway.child(gateway.admin, root["id"], "Sales", description="accounts")
    acme = await gateway.child(gateway.admin, sales["id"], "Acme", description="one customer")
    hr = await gateway.child(gateway.admin, root["id"], "HR", restricted=True)
    await _remember(gateway, root["id"], "Company holiday is in December")
    await _remember(gateway, sales["id"], "Pricing review for renewal season", type="note")
    await _remember(gateway, acme["id"], "Acme renews in March and wants its discount kept", type="fact",
                    attributes={"account": "acme"})
    await _remember(gateway, hr["id"], "Salary bands renewal for Acme staff")
    return {"root": root, "sales": sales, "acme": acme, "hr": hr}


async def test_recall_finds_below_and_names_where(gateway: Gateway) -> None:
    """A question asked of a parent finds a record below it and names the memory it is in."""
    t = await _tree(gateway)
    answer = await gateway.admin.post(f"/v1/memories/{t['sales']['id']}/recall", json={"text": "Acme renews"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["object"] == "memory.recall"
    assert body["results"][0]["memory"] == {"id": t["acme"]["id"], "name": "Acme"}
    assert body["results"][0]["why"] == ["text"]
    assert 0 <= body["results"][0]["score"] <= 1
    assert body["results"][0]["record"]["trust"] == "untrusted"
    assert body["parent"]["id"] == t["root"]["id"]
    assert [c["id"] for c in body["children"]] == [t["acme"]["id"]]


async def test_recall_never_searches_up(gateway: Gateway) -> None:
    """Asked of a child, a recall never returns its ancestor's records."""
    t = await _tree(gateway)
    answer = (await gateway.admin.post(f"/v1/memories/{t['acme']['id']}/recall", json={"text": "holiday"})).json()
    assert answer["results"] == []
    assert answer["abstain"] is True


async def test_each_descendant_is_judged_on_its_own(gateway: Gateway) -> None:
    """A reader of the root does not reach the restricted branch, except a memory granted inside it."""
    t = await _tree(gateway)
    inside = await gateway.child(gateway.admin, t["hr"]["id"], "Shared policies")
    await _remember(gateway, inside["id"], "Travel renewal policy")
    member_id, reader = await gateway.member("reader")
    await gateway.grant(t["root"]["id"], f"member:{member_id}", "read")
    await gateway.grant(inside["id"], f"member:{member_id}", "read")
    body = (await reader.post(f"/v1/memories/{t['root']['id']}/recall", json={"text": "renewal"})).json()
    places = {r["memory"]["id"] for r in body["results"]}
    assert inside["id"] in places
    assert t["hr"]["id"] not in places
    assert t["hr"]["id"] not in str(body)


async def test_depth_narrows_the_search(gateway: Gateway) -> None:
    """depth 0 searches the memory alone, 1 adds its children."""
    t = await _tree(gateway)
    zero = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall",
                                     json={"text": "renewal", "depth": 0})).json()
    one = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall",
                                    json={"text": "renewal", "depth": 1})).json()
    assert {r["memory"]["name"] for r in zero["results"]} == set()
    assert {r["memory"]["name"] for r in one["results"]} == {"Sales", "HR"}


async def test_the_cap_is_declared(tmp_path) -> None:
    """A recall over more memories than recall.cap searches the nearest and says subtree:capped_at_N."""
    from tests.api._gateway import make_config, running_gateway

    async with running_gateway(make_config(tmp_path, recall={"cap": 2})) as gw:
        root = await gw.root()
        for i in range(4):
            child = await gw.child(gw.admin, root["id"], f"c{i}")
            await _remember(gw, child["id"], f"needle number {i}")
        body = (await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "needle"})).json()
        assert "subtree:capped_at_2_memories" in body["degraded"]
        assert len(body["results"]) == 1  # the root and one child were searched


async def test_filters_types_and_limit(gateway: Gateway) -> None:
    """filters on attributes, types and limit shape the answer; why names filters."""
    t = await _tree(gateway)
    body = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall", json={
        "filters": {"field": "attributes.account", "op": "eq", "value": "acme"}, "types": ["fact"]})).json()
    assert [r["memory"]["name"] for r in body["results"]] == ["Acme"]
    assert body["results"][0]["why"] == ["filters"]
    limited = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall",
                                        json={"text": "renewal", "limit": 1})).json()
    assert len(limited["results"]) == 1


async def test_emulated_meaning_is_declared(gateway: Gateway) -> None:
    """query is answered by word matching on the embedded provider and degraded says so."""
    t = await _tree(gateway)
    body = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall",
                                     json={"query": "when does Acme renew its contract?"})).json()
    assert "provider:local:query:emulated" in body["degraded"]
    assert body["results"]


async def test_an_empty_recall_is_422(gateway: Gateway) -> None:
    """A recall with no signal is refused."""
    t = await _tree(gateway)
    for bad in ({}, {"types": ["fact"]}, {"query": ""}, {"depth": -1, "text": "x"}, {"limit": 0, "text": "x"}):
        answer = await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall", json=bad)
        assert answer.status_code == 422, bad


async def test_recall_needs_read(gateway: Gateway) -> None:
    """A writer without read cannot recall; a stranger gets the same 404 as for a missing memory."""
    t = await _tree(gateway)
    writer_id, writer = await gateway.member("w")
    await gateway.grant(t["root"]["id"], f"member:{writer_id}", "write")
    assert (await writer.post(f"/v1/memories/{t['root']['id']}/recall", json={"text": "x"})).status_code == 403
    _, stranger = await gateway.member("s")
    assert (await stranger.post(f"/v1/memories/{t['root']['id']}/recall", json={"text": "x"})).status_code == 404


async def test_graph_reads_two_entities_and_the_fact_between_them(gateway: Gateway) -> None:
    """Entities and a fact with subject and object come back as nodes and edges around one record."""
    t = await _tree(gateway)
    acme = t["acme"]["id"]
    dana = await _remember(gateway, acme, "Head of procurement", type="entity", title="Dana")
    quillon = await _remember(gateway, acme, "A freight company", type="entity", title="Quillon Freight")
    fact = await _remember(gateway, acme, "Dana is head of procurement at Quillon Freight", type="fact",
                           references=[{"rel": "subject", "memory_id": acme, "record_id": dana["id"]},
                                       {"rel": "object", "memory_id": acme, "record_id": quillon["id"]}])
    body = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/graph",
                                     json={"around": dana["id"], "hops": 2})).json()
    assert body["object"] == "memory.graph"
    ids = {n["record"]["id"] for n in body["nodes"]}
    assert ids == {dana["id"], quillon["id"], fact["id"]}
    rels = {(e["from"]["record_id"], e["to"]["record_id"], e["rel"]) for e in body["edges"]}
    assert rels == {(fact["id"], dana["id"], "subject"), (fact["id"], quillon["id"], "object")}
    one_hop = (await gateway.admin.post(f"/v1/memories/{acme}/graph",
                                        json={"around": dana["id"], "hops": 1, "types": ["entity"]})).json()
    assert {n["record"]["id"] for n in one_hop["nodes"]} == {dana["id"]}
    limited = (await gateway.admin.post(f"/v1/memories/{acme}/graph", json={"limit": 2})).json()
    assert limited["truncated"] is True and len(limited["nodes"]) == 2


async def test_graph_edges_into_unreadable_memories_are_unavailable(gateway: Gateway) -> None:
    """An edge whose target the reader may not read has available false, no rel and no memory id."""
    t = await _tree(gateway)
    secret = await _remember(gateway, t["hr"]["id"], "private")
    public = await _remember(gateway, t["sales"]["id"], "derived", references=[
        {"rel": "derived_from", "memory_id": t["hr"]["id"], "record_id": secret["id"]}])
    member_id, reader = await gateway.member("r")
    await gateway.grant(t["sales"]["id"], f"member:{member_id}", "read")
    body = (await reader.post(f"/v1/memories/{t['sales']['id']}/graph", json={"around": public["id"]})).json()
    assert body["edges"] == [{"from": {"memory_id": t["sales"]["id"], "record_id": public["id"]},
                              "to": {"record_id": secret["id"]}, "available": False}]
    assert t["hr"]["id"] not in str(body)
    hops = await reader.post(f"/v1/memories/{t['sales']['id']}/graph", json={"hops": 4})
    assert hops.status_code == 422


async def test_concurrent_recalls_share_one_count_of_the_children(gateway: Gateway) -> None:
    """When the cached counts are gone, recalls arriving together do not wait for them: each answers with
    the counts left out and says so, and all of them together cause one count, not one each, after which
    the counts are shown. Each gets the server-timing of its own work."""
    import asyncio

    t = await _tree(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    counted = 0
    original = handle.provider.count

    async def slow_count(memory_ids: Any) -> Any:
        nonlocal counted
        counted += 1
        await asyncio.sleep(0.05)
        return await original(memory_ids)

    handle.provider.count = slow_count  # type: ignore[method-assign]
    gateway.services.counts.forget_all()
    answers = await asyncio.gather(*(gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall",
                                                        json={"text": "renewal"}) for _ in range(5)))
    for answer in answers:
        assert answer.status_code == 200
        body = answer.json()
        assert {c["name"]: c["records"]["count"] for c in body["children"]} == {"Sales": None, "HR": None}
        assert "children:counts_pending" in body["degraded"]
        spans = dict(span.strip().split(";dur=") for span in answer.headers["server-timing"].split(","))
        assert set(spans) == {"app", "providers", "provider.local"}
        assert 0 <= float(spans["provider.local"]) <= float(spans["providers"]) <= float(spans["app"])
    for _ in range(100):
        body = (await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall", json={"text": "renewal"})).json()
        if "children:counts_pending" not in body["degraded"]:
            break
        await asyncio.sleep(0.02)
    assert {c["name"]: c["records"]["count"] for c in body["children"]} == {"Sales": 1, "HR": 1}  # admin reads HR
    assert counted == 1


async def test_server_timing_names_each_providers_time_on_a_recall(gateway: Gateway) -> None:
    """A recall's Server-Timing carries `provider.NAME;dur=` for every provider it asked (what the console's
    recall test shows), each within the providers' total."""
    t = await _tree(gateway)
    answer = await gateway.admin.post(f"/v1/memories/{t['root']['id']}/recall", json={"text": "renewal"})
    spans = dict(span.strip().split(";dur=") for span in answer.headers["server-timing"].split(","))
    assert "provider.local" in spans
    assert 0 <= float(spans["provider.local"]) <= float(spans["providers"])


async def test_an_old_count_is_shown_while_a_new_one_is_asked(gateway: Gateway) -> None:
    """Once counted, a memory's count is shown as it was after it expires and asked again after the answer
    has left; a write through the gateway drops it, so the writer sees its own write counted."""
    import asyncio
    from datetime import UTC, datetime

    from adapters.base import NewRecord, Part, Writer

    t = await _tree(gateway)
    root, sales = t["root"]["id"], t["sales"]["id"]

    async def sales_count() -> int | None:
        answer = await gateway.admin.post(f"/v1/memories/{root}/recall", json={"text": "renewal"})
        return {c["name"]: c["records"]["count"] for c in answer.json()["children"]}["Sales"]

    for _ in range(100):  # never seen: left out of the first answer, counted after it
        if await sales_count() == 1:
            break
        await asyncio.sleep(0.02)
    assert await sales_count() == 1
    # A record the gateway did not write (another client of the same store): nothing tells memfed.
    handle = gateway.services.providers.get("local")
    assert handle is not None
    await handle.provider.remember(sales, NewRecord("note", (Part(type="text", text="behind memfed's back"),),
                                                    Writer("member", "mbr_other"), datetime.now(UTC)))
    assert await sales_count() == 1  # still fresh
    gateway.services.counts.expire_all()
    assert await sales_count() == 1  # old, shown as it was; asked again after the answer, not awaited
    for _ in range(100):  # the new count arrives in the background
        if await sales_count() == 2:
            break
        await asyncio.sleep(0.02)
    assert await sales_count() == 2
    await _remember(gateway, sales, "One more, through memfed")
    assert await sales_count() is None  # a write through the gateway drops the count: never a stale one
    for _ in range(100):
        if await sales_count() == 3:
            break
        await asyncio.sleep(0.02)
    assert await sales_count() == 3


async def test_old_counts_are_asked_again_only_after_the_answer() -> None:
    """`of` answers an old count at once and leaves the new count to the work after the answer."""
    import asyncio

    from gateway.federation.counts import RecordCounts
    from gateway.state.tree import MemoryNode

    class SlowHandle:
        calls = 0

        def capabilities(self) -> Any:
            from adapters.local import CAPABILITIES

            return CAPABILITIES

        async def call_without_breaker(self, fn: Any) -> Any:
            SlowHandle.calls += 1
            await asyncio.sleep(0.05)
            return {"hmem_a": SlowHandle.calls}

    providers = {"slow": SlowHandle()}
    node = MemoryNode("hmem_a", "A", "", None, False, "slow", "member:x", 0, 0)
    counts = RecordCounts()
    assert await counts.of(providers, [node]) == {"hmem_a": 1}  # never seen: waited for
    counts.expire_all()
    later: list[Any] = []
    assert await asyncio.wait_for(counts.of(providers, [node], later=later), 0.02) == {"hmem_a": 1}
    assert SlowHandle.calls == 1 and len(later) == 1
    await later[0]()
    assert await asyncio.wait_for(counts.of(providers, [node]), 0.02) == {"hmem_a": 2}
