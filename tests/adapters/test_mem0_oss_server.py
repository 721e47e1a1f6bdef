"""The mem0 adapter against what a real mem0 OSS server (mem0ai 2.2.1, faiss) was observed to do
(shared/vendors/mem0.md, "The real OSS server, observed"): first that the fake does it, then that the
adapter copes: changes one at a time per server, erase that says what it did, a search pool widened
until it is whole or capped, and no write that would make a memory unlistable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from adapters.base import (
    Condition,
    ErasureIncomplete,
    NewRecord,
    Part,
    ProviderUnavailable,
    RecallQuery,
    RecordLimit,
    RecordNotFound,
    Revision,
    Writer,
)
from adapters.mem0 import Mem0Provider
from tests.adapters.fake_mem0 import OSS_URL, FakeMem0, mem0_provider

KEY = "m0-SECRET-test-key-7f3a9c"
AGENT = Writer(kind="member", id="mbr_agent", type="agent")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
MEM_A = "hmem_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
MEM_B = "hmem_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
ENTITY_A = "memfed-" + MEM_A


def note(text: str, *, minutes: int = 0, **fields: Any) -> NewRecord:
    return NewRecord(type="note", content=(Part(type="text", text=text),), written_by=AGENT,
                     written_at=T0 + timedelta(minutes=minutes), **fields)


@pytest.fixture
def fake() -> FakeMem0:
    return FakeMem0("oss", KEY)


@pytest.fixture
async def mem0(fake: FakeMem0) -> AsyncIterator[Mem0Provider]:
    async with mem0_provider("oss", fake) as provider:
        yield provider


async def raw(fake: FakeMem0, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async with fake.client() as client:
        return await client.request(method, OSS_URL + path, headers={"X-API-Key": KEY}, **kwargs)


def add_body(user_id: str, text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "user_id": user_id, "infer": False}


def searched(response: httpx.Response) -> list[str]:
    return [item["memory"] for item in response.json()["results"]]


# --------------------------------------------------------------------------- the fake is the server


async def test_the_fake_fails_a_change_that_overlaps_another_and_corrupts_its_search(fake: FakeMem0) -> None:
    """Two updates at once: one is 502 (and applied anyway), and a search for a memory's own words no
    longer finds it first."""
    ids = [fake.add_raw("u1", f"memory number {word}") for word in ("alpha", "bravo", "charlie")]
    fake.write_seconds = 0.01
    async with fake.client() as client:
        answers = await asyncio.gather(*(
            client.put(f"{OSS_URL}/memories/{vendor_id}", headers={"X-API-Key": KEY}, json={"text": text})
            for vendor_id, text in ((ids[0], "memory number delta"), (ids[1], "memory number echo"))
        ))
    assert sorted(a.status_code for a in answers) == [200, 502]
    failed = next(a for a in answers if a.status_code == 502).json()
    assert failed["code"] == "provider_unavailable" and failed["request_id"]
    assert {fake.memories[i]["memory"] for i in ids[:2]} == {"memory number delta", "memory number echo"}
    found = await raw(fake, "POST", "/search", json={"query": "charlie", "filters": {"user_id": "u1"}, "threshold": 0})
    assert searched(found)[:1] != ["memory number charlie"] and fake.corrupt


async def test_the_fake_drops_memories_unlike_the_question_even_at_threshold_zero(fake: FakeMem0) -> None:
    """Similarities run from -1 to 1: a memory sharing nothing with the question is below 0 and dropped."""
    fake.add_raw("u1", "Acme renews in March")
    fake.add_raw("u1", "The coffee machine is broken")
    found = await raw(fake, "POST", "/search", json={"query": "Acme renewal", "filters": {"user_id": "u1"},
                                                     "threshold": 0, "top_k": 10})
    assert searched(found) == ["Acme renews in March"]


async def test_the_fake_cuts_the_candidate_pool_before_the_entity_filter(fake: FakeMem0) -> None:
    """With many closer memories of other entities, top_k=3 finds nothing of u1; top_k=100 finds it."""
    for i in range(200):
        fake.add_raw(f"other{i}", "renewal terms renewal")
    fake.add_raw("u1", "renewal dates for Acme")
    body = {"query": "renewal terms", "filters": {"user_id": "u1"}, "threshold": 0}
    assert searched(await raw(fake, "POST", "/search", json={**body, "top_k": 3})) == []
    assert searched(await raw(fake, "POST", "/search", json={**body, "top_k": 100})) == ["renewal dates for Acme"]


async def test_the_fake_answers_in_the_real_servers_shapes(fake: FakeMem0) -> None:
    """get and search items always carry metadata (null when empty), get a null score, add an actor_id;
    the server's own failure is 502 with code and request id; a listing stops at 1,000."""
    added = (await raw(fake, "POST", "/memories", json=add_body("u1", "plain words"))).json()["results"][0]
    assert added["actor_id"] is None and added["event"] == "ADD"
    got = (await raw(fake, "GET", f"/memories/{added['id']}")).json()
    assert got["metadata"] is None and got["score"] is None
    item = (await raw(fake, "POST", "/search", json={"query": "plain", "filters": {"user_id": "u1"}})).json()
    assert item["results"][0]["metadata"] is None
    inferred = await raw(fake, "POST", "/memories", json={**add_body("u1", "x"), "infer": True})
    assert inferred.status_code == 502 and inferred.json()["code"] == "provider_unavailable"
    for i in range(1001):
        fake.add_raw("u2", f"n{i}")
    listed = await raw(fake, "GET", "/memories", params={"user_id": "u2", "top_k": 1000})
    assert len(listed.json()["results"]) == 1000
    entities = (await raw(fake, "GET", "/entities")).json()
    assert {"id": "u2", "type": "user", "total_memories": 1001} in [
        {k: e[k] for k in ("id", "type", "total_memories")} for e in entities]


# --------------------------------------------------------------------------- one change at a time


async def test_changes_reach_an_oss_server_one_at_a_time(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """Concurrent remembers, revises and an erase never overlap at the server, so none fails and the
    index stays whole: a record is still found first by its own words."""
    fake.write_seconds = 0.002
    written = await asyncio.gather(*(mem0.remember(MEM_A, note(f"fact {w}", minutes=i))
                                     for i, w in enumerate(("amber", "basalt", "cobalt", "dune", "ember", "flint"))))
    await asyncio.gather(*(mem0.revise(MEM_A, r.id, Revision(written_by=AGENT, written_at=T0 + timedelta(hours=1),
                                                              title=f"revised {i}"))
                           for i, r in enumerate(written)),
                         mem0.erase(MEM_A, [written[0].id, written[1].id]))
    assert fake.collisions == [] and not fake.corrupt
    answer = await mem0.recall([MEM_A], RecallQuery(query="cobalt", limit=1))
    assert [h.record.id for h in answer.hits] == [written[2].id]


async def test_a_change_whose_caller_stopped_waiting_keeps_the_servers_turn(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """A write abandoned by its caller's timeout still runs to its end before the next change is sent."""
    fake.write_seconds = 0.05
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(mem0.remember(MEM_A, note("first words")), timeout=0.01)
    second = await mem0.remember(MEM_A, note("second words", minutes=1))
    assert fake.collisions == []
    assert sorted(m["memory"] for m in fake.memories.values()) == ["first words", "second words"]
    assert (await mem0.get(MEM_A, second.id)).id == second.id


async def test_two_providers_on_one_oss_server_share_its_turn(fake: FakeMem0) -> None:
    """The turn is the server's, not the adapter's: two providers configured on one server never overlap."""
    fake.write_seconds = 0.002
    async with mem0_provider("oss", fake) as one, mem0_provider("oss", fake) as two:
        await asyncio.gather(*(p.remember(m, note(f"n{i}")) for i in range(4) for p, m in ((one, MEM_A), (two, MEM_B))))
    assert fake.collisions == [] and len(fake.memories) == 8


# --------------------------------------------------------------------------- erase


async def test_erase_of_twelve_records_erases_them_all_and_leaves_the_index_whole(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """The observed failure: twelve deletes at once crashed the server's store. Now each waits its turn."""
    doomed = [await mem0.remember(MEM_A, note(f"doomed {i}", minutes=i)) for i in range(12)]
    kept = await mem0.remember(MEM_A, note("the survivor stays", minutes=20))
    erasure = await mem0.erase(MEM_A, [r.id for r in doomed])
    assert erasure.erased == tuple(r.id for r in doomed) and set(erasure.unreachable) == set(erasure.erased)
    assert fake.collisions == [] and list(fake.memories) == [kept.id.removeprefix("hrec_")]
    answer = await mem0.recall([MEM_A], RecallQuery(query="the survivor stays", limit=1))
    assert [h.record.id for h in answer.hits] == [kept.id]


@pytest.mark.parametrize("variant", ["platform", "oss"])
async def test_erase_says_exactly_what_it_erased_when_some_deletes_fail(variant: str) -> None:
    """Two of twelve deletes fail: the other ten are erased and said so, the two are named as remaining."""
    fake = FakeMem0(variant, KEY)  # type: ignore[arg-type]
    async with mem0_provider(fake.variant, fake) as mem0:
        records = [await mem0.remember(MEM_A, note(f"record {i}", minutes=i)) for i in range(12)]
        failing = {records[3].id.removeprefix("hrec_"), records[7].id.removeprefix("hrec_")}
        fake.fail("500", times=2,
                  when=lambda r: r.method == "DELETE" and r.url.path.strip("/").split("/")[-1] in failing)
        with pytest.raises(ErasureIncomplete) as caught:
            await mem0.erase(MEM_A, [r.id for r in records])
    done = caught.value
    assert set(done.remaining) == {records[3].id, records[7].id}
    assert set(done.erased) == {r.id for r in records} - set(done.remaining)
    assert set(done.unreachable) == set(done.erased)  # mem0 keeps the history of what it deleted
    assert done.reason == "unavailable" and set(fake.memories) == failing


async def test_a_delete_answered_as_failed_but_applied_is_erased(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """The server may apply a change it answers 502: the adapter looks before it says "not erased"."""
    a = await mem0.remember(MEM_A, note("applied anyway"))
    b = await mem0.remember(MEM_A, note("plain delete", minutes=1))
    fake.fail("applied", when=lambda r: r.method == "DELETE" and r.url.path.endswith(a.id.removeprefix("hrec_")))
    erasure = await mem0.erase(MEM_A, [a.id, b.id])
    assert erasure.erased == (a.id, b.id) and fake.memories == {}


async def test_an_erase_that_erased_nothing_fails_with_the_vendors_own_failure(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Nothing erased: the vendor's failure is the answer, and the record is still there."""
    record = await mem0.remember(MEM_A, note("still here"))
    fake.fail("500", times=5, when=lambda r: r.method == "DELETE")
    with pytest.raises(ProviderUnavailable) as caught:
        await mem0.erase(MEM_A, [record.id])
    assert not isinstance(caught.value, ErasureIncomplete)
    assert (await mem0.get(MEM_A, record.id)).id == record.id


# --------------------------------------------------------------------------- the search pool


async def test_recall_finds_a_memorys_records_among_many_other_entities(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """The server cuts its pool before it keeps the entity: the adapter asks again with a larger pool."""
    mine = await mem0.remember(MEM_A, note("renewal dates for Acme"))
    for i in range(300):
        fake.add_raw(f"someone-else-{i}", "renewal terms renewal terms")
    answer = await mem0.recall([MEM_A], RecallQuery(query="renewal terms", limit=3))
    assert [h.record.id for h in answer.hits] == [mine.id] and answer.degraded == ()


async def test_recall_that_reaches_the_largest_pool_says_pool_limited(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """When even the largest pool mem0 is asked for cannot be shown to hold every match, the answer says so."""
    await mem0.remember(MEM_A, note("renewal dates for Acme"))
    for i in range(8100):
        fake.add_raw(f"someone-else-{i}", "renewal terms renewal terms")
    answer = await mem0.recall([MEM_A], RecallQuery(query="renewal terms", limit=3))
    assert answer.hits == () and answer.degraded == ("pool_limited",)
    assert max(b["top_k"] for b in fake.bodies("POST") if b and "query" in b) == 1000


async def test_a_short_answer_that_is_whole_is_not_asked_again(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """A memory with fewer records than asked, one unlike the question, on a small server: one search."""
    await mem0.remember(MEM_A, note("Acme renews in March"))
    await mem0.remember(MEM_A, note("coffee machine broken", minutes=1))
    fake.requests.clear()
    answer = await mem0.recall([MEM_A], RecallQuery(query="Acme renewal", limit=10))
    assert len(answer.hits) == 1 and answer.degraded == ()
    assert [r.url.path for r in fake.requests if r.url.path == "/search"] == ["/search"]


async def test_recalls_over_many_memories_at_once_share_one_read_of_the_sizes(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Each memory's short answer needs the sizes; ten recalls at once read them once, not ten times."""
    memories = [f"hmem_{i:032d}" for i in range(10)]
    for memory_id in memories:
        fake.add_raw("memfed-" + memory_id, "Acme renews in March")
        fake.add_raw("memfed-" + memory_id, "coffee machine broken")
    for i in range(200):
        fake.add_raw(f"someone-else-{i}", "unrelated words only")
    answers = await asyncio.gather(*(mem0.recall([m], RecallQuery(query="Acme renewal", limit=5)) for m in memories))
    assert all(len(a.hits) == 1 for a in answers)
    assert len([r for r in fake.requests if r.url.path == "/entities"]) <= 2


async def test_query_and_filters_return_a_match_unlike_the_question(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """The issue's case: a record that matches the filters but whose similarity to the question is below 0
    is still returned, after the one matching both, as on the embedded provider."""
    both = await mem0.remember(MEM_A, note("Acme renews in March", attributes={"account": "acme"}))
    unlike = await mem0.remember(MEM_A, note("coffee machine broken", minutes=1, attributes={"account": "acme"}))
    answer = await mem0.recall([MEM_A], RecallQuery(query="Acme renewal", filters=(
        Condition("attributes.account", "eq", "acme"),)))
    assert [(h.record.id, h.why) for h in answer.hits] == [(both.id, ("query", "filters")), (unlike.id, ("filters",))]


# --------------------------------------------------------------------------- the listing limit


async def test_a_write_that_would_make_an_oss_memory_unlistable_is_refused(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """The server lists at most 1,000 memories of one entity: the write that would pass 999 is refused,
    the limit is in the capability document, and the memory stays listable whole."""
    for i in range(998):
        fake.add_raw(ENTITY_A, f"older {i}")
    await mem0.remember(MEM_A, note("the last one that fits"))
    with pytest.raises(RecordLimit, match="999"):
        await mem0.remember(MEM_A, note("one too many", minutes=1))
    assert len(fake.memories) == 999
    assert mem0.capabilities().document("m0")["x.memfed"]["records_per_memory"] == 999
    assert await mem0.count([MEM_A]) == {MEM_A: 999}


async def test_two_writes_racing_for_the_last_place_get_one(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """The size is read and the add made in one turn of the server: only one of two can take the place."""
    for i in range(998):
        fake.add_raw(ENTITY_A, f"older {i}")
    await mem0.count([MEM_A])  # the sizes are read once before the race
    results = await asyncio.gather(mem0.remember(MEM_A, note("one")), mem0.remember(MEM_A, note("two")),
                                   return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["Record", "RecordLimit"]
    assert len(fake.memories) == 999


async def test_near_the_limit_a_write_sees_records_added_at_mem0_behind_memfeds_back(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Near the limit the size is read again before each write, so others' writes there are counted."""
    for i in range(950):
        fake.add_raw(ENTITY_A, f"older {i}")
    await mem0.remember(MEM_A, note("memfed's own"))
    for i in range(48):
        fake.add_raw(ENTITY_A, f"written elsewhere {i}")
    with pytest.raises(RecordLimit):
        await mem0.remember(MEM_A, note("one too many"))
    assert len(fake.memories) == 999


async def test_a_memory_already_past_the_limit_fails_every_read_the_same_way(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Written outside memfed: listing, counting and a filters recall all answer RecordLimit."""
    for i in range(1000):
        fake.add_raw(ENTITY_A, f"n{i}")
    with pytest.raises(RecordLimit):
        await mem0.list(MEM_A)
    with pytest.raises(RecordLimit):
        await mem0.count([MEM_A])
    with pytest.raises(RecordLimit):
        await mem0.recall([MEM_A], RecallQuery(filters=(Condition("type", "eq", "fact"),)))
    with pytest.raises(RecordNotFound):
        await mem0.get(MEM_A, "hrec_00000000-0000-4000-8000-000000000000")
