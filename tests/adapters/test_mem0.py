"""The mem0 adapter against a fake of each mem0 variant: wire shapes, isolation, paging, erase, errors,
and the vendor key staying out of everything the adapter says."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from adapters.base import (
    Condition,
    Erasure,
    FileRef,
    NewRecord,
    Part,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
    RecallQuery,
    RecordLimit,
    RecordNotFound,
    Reference,
    Revision,
    Unsupported,
    Writer,
)
from adapters.mem0 import Mem0Provider
from tests.adapters.fake_mem0 import OSS_URL, PLATFORM_URL, FakeMem0, Variant, mem0_provider

VARIANTS: tuple[Variant, ...] = ("platform", "oss")
KEY = "m0-SECRET-test-key-7f3a9c"
AGENT = Writer(kind="member", id="mbr_agent", type="agent")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
MEM_A = "hmem_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
MEM_B = "hmem_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def note(text: str, *, minutes: int = 0, type: str = "note", **fields: Any) -> NewRecord:
    return NewRecord(
        type=type,
        content=(Part(type="text", text=text),),
        written_by=AGENT,
        written_at=T0 + timedelta(minutes=minutes),
        **fields,
    )


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Variant:
    return request.param


@pytest.fixture
def fake(variant: Variant) -> FakeMem0:
    return FakeMem0(variant, KEY)


@pytest.fixture
async def mem0(fake: FakeMem0) -> AsyncIterator[Mem0Provider]:
    async with mem0_provider(fake.variant, fake) as provider:
        yield provider


async def exercise(mem0: Mem0Provider) -> list[Any]:
    """Every operation of the contract once; returns what came back."""
    out: list[Any] = []
    first = await mem0.remember(MEM_A, note("Acme renews in March", title="Acme renewal"))
    second = await mem0.remember(MEM_A, note("Quillon prefers email", minutes=1))
    out += [first, second]
    out.append(await mem0.get(MEM_A, first.id))
    out.append(await mem0.revise(MEM_A, first.id, Revision(written_by=AGENT, written_at=T0 + timedelta(hours=1))))
    out.append(await mem0.history(MEM_A, first.id))
    out.append(await mem0.list(MEM_A))
    out.append(await mem0.recall([MEM_A, MEM_B], RecallQuery(query="when does Acme renew")))
    out.append(await mem0.count([MEM_A, MEM_B]))
    out.append(await mem0.forget(MEM_A, second.id, AGENT, T0 + timedelta(hours=2)))
    out.append(await mem0.erase(MEM_A, [first.id]))
    await mem0.drop_memory(MEM_A)
    return out


# --------------------------------------------------------------------------- the two dialects


async def test_platform_speaks_token_auth_v3_paths_and_trailing_slashes() -> None:
    """Platform: `Authorization: Token <key>`, v3 add/search/list, v1 by id, every path ending in /."""
    fake = FakeMem0("platform", KEY)
    async with mem0_provider("platform", fake) as mem0:
        await exercise(mem0)
    assert fake.requests
    for request in fake.requests:
        assert request.headers["authorization"] == f"Token {KEY}"
        assert "x-api-key" not in request.headers
        assert request.url.path.endswith("/")
        assert str(request.url).startswith(PLATFORM_URL)
    calls = {(r.method, r.url.path) for r in fake.requests}
    assert ("POST", "/v3/memories/add/") in calls
    assert ("POST", "/v3/memories/search/") in calls
    assert ("POST", "/v3/memories/") in calls
    assert ("DELETE", "/v1/memories/") in calls
    assert any(m == "GET" and p.endswith("/history/") for m, p in calls)


async def test_oss_speaks_api_key_header_and_bare_paths() -> None:
    """OSS: `X-API-Key`, no /v1 or /v3 prefix, no trailing slash (the server does not match one)."""
    fake = FakeMem0("oss", KEY)
    async with mem0_provider("oss", fake) as mem0:
        await exercise(mem0)
    assert fake.requests
    for request in fake.requests:
        assert request.headers["x-api-key"] == KEY
        assert "authorization" not in request.headers
        assert not request.url.path.endswith("/")
        assert not request.url.path.startswith(("/v1", "/v3"))
        assert str(request.url).startswith(OSS_URL)
    calls = {(r.method, r.url.path) for r in fake.requests}
    assert {("POST", "/memories"), ("POST", "/search"), ("GET", "/memories"), ("DELETE", "/memories")} <= calls


async def test_oss_without_a_key_sends_no_key_header() -> None:
    """An OSS server run with AUTH_DISABLED takes requests without a key; none is invented."""
    fake = FakeMem0("oss", api_key=None)
    async with mem0_provider("oss", fake) as mem0:
        await mem0.remember(MEM_A, note("x"))
    assert all("x-api-key" not in r.headers for r in fake.requests)


async def test_every_write_is_stored_as_stated(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """Every add sends `infer: false` (otherwise mem0 rewrites the record, or OSS fails without an LLM)."""
    await exercise(mem0)
    add_paths = ("/v3/memories/add/", "/memories")
    sent = zip(fake.requests, fake.bodies(), strict=True)
    adds = [body for r, body in sent if r.method == "POST" and r.url.path in add_paths]
    assert len(adds) == 2
    assert all(body["infer"] is False for body in adds)


async def test_every_read_and_write_names_the_memory_entity(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """Adds carry the memory's user_id at the top, searches and lists inside `filters` or the query."""
    await exercise(mem0)
    asked = {"memfed-" + MEM_A, "memfed-" + MEM_B}
    by_id = re.compile(r"/(v1/)?memories/[0-9a-f-]{36}(/history)?/?")
    for request in fake.requests:
        if by_id.fullmatch(request.url.path):
            continue  # fetched by id: the answer's entity is checked instead (the isolation tests)
        if request.url.path == "/entities":
            continue  # OSS sizes: counts per entity, never a record (adapters/mem0/_sizes.py)
        named = set(re.findall(r"memfed-hmem_[0-9a-z]+", unquote(str(request.url)) + request.content.decode()))
        assert named and named <= asked, f"{request.method} {request.url.path} names {named or 'no memory'}"
    searches = [b for r, b in zip(fake.requests, fake.bodies(), strict=True) if "search" in r.url.path]
    assert searches and all("user_id" not in body for body in searches)  # ids only inside filters
    assert all(body["threshold"] == 0 for body in searches)


async def test_platform_searches_many_memories_in_one_call() -> None:
    """Platform v3 takes an OR of entity ids inside `filters`: one call for several memories."""
    fake = FakeMem0("platform", KEY)
    async with mem0_provider("platform", fake) as mem0:
        a = await mem0.remember(MEM_A, note("renewal terms for Acme"))
        b = await mem0.remember(MEM_B, note("renewal terms for Acme and Quillon"))
        fake.requests.clear()
        answer = await mem0.recall([MEM_A, MEM_B], RecallQuery(query="renewal Quillon", limit=5))
    assert [r.url.path for r in fake.requests] == ["/v3/memories/search/"]
    filters = fake.bodies()[0]["filters"]
    assert filters == {"OR": [{"user_id": "memfed-" + MEM_A}, {"user_id": "memfed-" + MEM_B}]}
    assert [h.record.id for h in answer.hits] == [b.id, a.id]
    assert [h.record.memory_id for h in answer.hits] == [MEM_B, MEM_A]


async def test_platform_counts_many_memories_in_one_listing() -> None:
    """Counting a parent's children costs one run of pages for all of them, not one listing each; a
    forgotten record is not counted, and a memory without records counts 0."""
    fake = FakeMem0("platform", KEY)
    async with mem0_provider("platform", fake) as mem0:
        await mem0.remember(MEM_A, note("one"))
        await mem0.remember(MEM_A, note("two", minutes=1))
        gone = await mem0.remember(MEM_B, note("forgotten", minutes=2))
        await mem0.forget(MEM_B, gone.id, AGENT, T0 + timedelta(hours=1))
        empty = "hmem_cccccccccccccccccccccccccccccccc"
        fake.requests.clear()
        assert await mem0.count([MEM_A, MEM_B, empty]) == {MEM_A: 2, MEM_B: 0, empty: 0}
    assert [r.url.path for r in fake.requests] == ["/v3/memories/"]


async def test_oss_searches_each_memory_and_merges_by_score() -> None:
    """OSS refuses an OR of user_ids, so each memory is one call; the hits come back as one ranking."""
    fake = FakeMem0("oss", KEY)
    async with mem0_provider("oss", fake) as mem0:
        a = await mem0.remember(MEM_A, note("renewal terms for Acme"))
        b = await mem0.remember(MEM_B, note("renewal terms for Acme and Quillon"))
        fake.requests.clear()
        answer = await mem0.recall([MEM_A, MEM_B], RecallQuery(query="renewal Quillon", limit=5))
    filters = [body["filters"] for body in fake.bodies()]
    assert sorted(f["user_id"] for f in filters) == ["memfed-" + MEM_A, "memfed-" + MEM_B]
    assert [h.record.id for h in answer.hits] == [b.id, a.id]
    assert answer.hits[0].score > answer.hits[1].score


def test_capability_documents_say_what_each_variant_does() -> None:
    """Both: enforced_filter, no `text`, `filters` emulated, versions kept, erase reported, no as_of;
    only the Platform searches many memories in one call."""
    client = httpx.AsyncClient()
    platform = Mem0Provider(client, base_url=PLATFORM_URL, api_key=KEY, variant="platform").capabilities()
    oss = Mem0Provider(client, base_url=OSS_URL, api_key=KEY, variant="oss").capabilities()
    for caps in (platform, oss):
        assert caps.isolation == "enforced_filter"
        assert caps.signals == ("query", "filters") and caps.emulated_signals == ("filters",)
        assert (caps.revise, caps.forget, caps.erase_unreachable) == ("emulated", "emulated", "reported")
        assert (caps.history_content, caps.history_structure, caps.as_of) == ("versions", "versions", False)
    assert platform.searches_many_memories and not oss.searches_many_memories
    assert platform.document("mem0")["x.memfed"]["searches_many_memories"] is True


# --------------------------------------------------------------------------- records round-trip


async def test_a_record_reads_back_exactly_as_written(mem0: Mem0Provider) -> None:
    """Title, every kind of part, attributes, references, validity and writer survive mem0."""
    written = await mem0.remember(
        MEM_A,
        NewRecord(
            type="x.contract",
            title="Acme master agreement",
            content=(
                Part(type="text", text="Signed in 2025.", role="user"),
                Part(
                    type="file",
                    file=FileRef(id="file_1", name="msa.pdf", media_type="application/pdf", bytes=4096),
                    text="The signed agreement",
                    text_source="stated",
                ),
                Part(type="x.signature", extra={"by": "dana", "nested": {"ok": [1, 2]}}),
            ),
            written_by=Writer(kind="provider", id="p", on_behalf_of="mbr_9", consolidation_id="hcon_1"),
            written_at=T0,
            attributes={"account": "acme", "value": 12000.5, "tags": ["a", "b"], "flag": None},
            references=(Reference(memory_id=MEM_B, record_id="hrec_1", rel="about"), Reference(MEM_A, "hrec_2")),
            valid_from=T0 - timedelta(days=30),
            valid_to=T0 + timedelta(days=335),
        ),
    )
    assert await mem0.get(MEM_A, written.id) == written
    assert (await mem0.list(MEM_A)).items == (written,)


async def test_history_rebuilds_every_version(mem0: Mem0Provider) -> None:
    """mem0 overwrites on update; every earlier version comes back from memfed's metadata, in order."""
    first = await mem0.remember(MEM_A, note("v1", title="T", attributes={"n": 1}))
    second = await mem0.revise(MEM_A, first.id, Revision(AGENT, T0 + timedelta(hours=1), attributes={"n": 2}))
    third = await mem0.revise(
        MEM_A, first.id, Revision(AGENT, T0 + timedelta(hours=2), content=(Part(type="text", text="v3"),))
    )
    versions = await mem0.history(MEM_A, first.id)
    assert [(v.version, v.supersedes, v.status) for v in versions] == [
        (1, None, "superseded"),
        (2, 1, "superseded"),
        (3, 2, "active"),
    ]
    assert versions[0].content == first.content and versions[0].attributes == {"n": 1}
    assert versions[1].attributes == {"n": 2} and versions[2] == third == await mem0.get(MEM_A, first.id)
    assert versions[0].time.invalidated_at == second.time.written_at


async def test_forget_keeps_the_record_at_mem0_and_takes_it_out_of_reads(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Forget is emulated: the memory stays at mem0 marked forgotten; list, recall and count leave it."""
    kept = await mem0.remember(MEM_A, note("Acme renews in March"))
    gone = await mem0.remember(MEM_A, note("Acme renews in April", minutes=1))
    tombstone = await mem0.forget(MEM_A, gone.id, AGENT, T0 + timedelta(hours=1))
    assert (tombstone.status, tombstone.version, tombstone.supersedes) == ("forgotten", 2, 1)
    assert len(fake.memories) == 2
    assert [r.id for r in (await mem0.list(MEM_A)).items] == [kept.id]
    assert {r.id for r in (await mem0.list(MEM_A, include="all")).items} == {kept.id, gone.id}
    hits = (await mem0.recall([MEM_A], RecallQuery(query="Acme renews"))).hits
    assert [h.record.id for h in hits] == [kept.id]
    assert await mem0.count([MEM_A]) == {MEM_A: 1}
    assert await mem0.get(MEM_A, gone.id) == tombstone


async def test_recall_asks_again_when_forgotten_records_crowd_the_top(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Forgotten records are judged after mem0 ranks; the adapter asks for more until `limit` is met."""
    written = [await mem0.remember(MEM_A, note(f"Acme renewal detail {i}", minutes=i)) for i in range(30)]
    for record in written[:27]:
        await mem0.forget(MEM_A, record.id, AGENT, T0 + timedelta(days=1))
    fake.requests.clear()
    hits = (await mem0.recall([MEM_A], RecallQuery(query="Acme renewal detail", limit=3))).hits
    assert {h.record.id for h in hits} == {r.id for r in written[27:]}
    asked = [body["top_k"] for body in fake.bodies()]
    assert len(asked) > 1 and asked == sorted(asked)


async def test_a_record_changed_at_mem0_itself_shows_the_change(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """An edit made in mem0's dashboard is a version of its own, by the provider, after memfed's."""
    record = await mem0.remember(MEM_A, note("Acme renews in March", title="Acme"))
    vendor_id = record.id.removeprefix("hrec_")
    fake.memories[vendor_id]["memory"] = "Acme renews in May"
    current = await mem0.get(MEM_A, record.id)
    assert (current.version, current.written_by.kind, current.content[0].text) == (2, "provider", "Acme renews in May")
    versions = await mem0.history(MEM_A, record.id)
    assert [v.status for v in versions] == ["superseded", "active"] and versions[0].content == record.content


async def test_a_memory_memfed_did_not_write_reads_as_the_providers_fact(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """A memory mem0 derived under the entity is shown, as a fact written by the provider."""
    fake.add_raw("memfed-" + MEM_A, "Dana is head of procurement")
    (record,) = (await mem0.list(MEM_A)).items
    assert (record.type, record.written_by.kind, record.written_by.id) == ("fact", "provider", "mem0")
    assert record.content == (Part(type="text", text="Dana is head of procurement"),)


# --------------------------------------------------------------------------- isolation


async def test_a_record_of_another_memory_is_not_found(fake: FakeMem0, mem0: Mem0Provider) -> None:
    """Fetched by id through the wrong memory, a record does not exist, for every operation."""
    record = await mem0.remember(MEM_A, note("Acme renews in March"))
    revision = Revision(AGENT, T0 + timedelta(hours=1), title="changed")
    for attempt in (
        mem0.get(MEM_B, record.id),
        mem0.history(MEM_B, record.id),
        mem0.revise(MEM_B, record.id, revision),
        mem0.forget(MEM_B, record.id, AGENT, T0 + timedelta(hours=1)),
    ):
        with pytest.raises(RecordNotFound):
            await attempt
    assert await mem0.erase(MEM_B, [record.id]) == Erasure(erased=(), unreachable=())
    assert await mem0.get(MEM_A, record.id) == record  # untouched


async def test_a_record_filed_under_the_entity_for_another_memory_is_not_shown(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """If memfed's metadata names another memory than the entity, the record is in neither."""
    record = await mem0.remember(MEM_A, note("Acme renews in March"))
    vendor_id = record.id.removeprefix("hrec_")
    fake.memories[vendor_id]["user_id"] = "memfed-" + MEM_B
    assert (await mem0.list(MEM_B)).items == ()
    with pytest.raises(RecordNotFound):
        await mem0.get(MEM_B, record.id)


@pytest.mark.parametrize("record_id", ["hrec_../../v1/memories", "abc", "hrec_", "hrec_" + "A" * 32])
async def test_an_id_that_cannot_name_a_mem0_memory_is_not_found_without_asking(
    fake: FakeMem0, mem0: Mem0Provider, record_id: str
) -> None:
    with pytest.raises(RecordNotFound):
        await mem0.get(MEM_A, record_id)
    assert fake.requests == []


@pytest.mark.parametrize("memory_id", ["*", "", "a b", "hmem_1/../x"])
async def test_a_memory_id_mem0_would_read_as_a_wildcard_is_refused(
    fake: FakeMem0, mem0: Mem0Provider, memory_id: str
) -> None:
    """mem0 reads `*` as every entity; such an id never reaches it."""
    with pytest.raises(ProviderRejected):
        await mem0.drop_memory(memory_id)
    with pytest.raises(ProviderRejected):
        await mem0.list(memory_id)
    assert fake.requests == []


async def test_drop_memory_deletes_that_memory_only(fake: FakeMem0, mem0: Mem0Provider) -> None:
    await mem0.remember(MEM_A, note("a"))
    b = await mem0.remember(MEM_B, note("b"))
    await mem0.drop_memory(MEM_A)
    assert await mem0.count([MEM_A, MEM_B]) == {MEM_A: 0, MEM_B: 1}
    assert (await mem0.list(MEM_B)).items == (b,)


# --------------------------------------------------------------------------- listing


async def test_oss_listing_beyond_twenty_loses_nothing() -> None:
    """The OSS server stops at 20 unless told otherwise; every record still comes back, newest first."""
    fake = FakeMem0("oss", KEY)
    async with mem0_provider("oss", fake) as mem0:
        written = [await mem0.remember(MEM_A, note(f"fact {i}", minutes=i)) for i in range(45)]
        seen, cursor = [], None
        while True:
            page = await mem0.list(MEM_A, cursor=cursor, limit=10)
            seen.extend(page.items)
            if page.next is None:
                break
            cursor = page.next
        assert await mem0.count([MEM_A]) == {MEM_A: 45}
    assert [r.id for r in seen] == [r.id for r in reversed(written)]
    lists = [r for r in fake.requests if r.method == "GET" and r.url.path == "/memories"]
    assert lists and all(r.url.params["top_k"] == "1000" for r in lists)


async def test_oss_listing_that_fills_the_server_cap_is_refused_not_truncated() -> None:
    """The OSS server lists at most 1000 and has no offset: a full answer cannot be proven complete."""
    fake = FakeMem0("oss", KEY)
    for i in range(1000):
        fake.add_raw("memfed-" + MEM_A, f"fact {i}")
    async with mem0_provider("oss", fake) as mem0:
        with pytest.raises(RecordLimit, match="1000"):
            await mem0.list(MEM_A)
        with pytest.raises(RecordLimit):
            await mem0.count([MEM_A])


async def test_platform_listing_follows_every_page() -> None:
    """The Platform pages by 200 at most; the adapter follows `next` to the end."""
    fake = FakeMem0("platform", KEY)
    for i in range(450):
        fake.add_raw("memfed-" + MEM_A, f"fact {i}")
    async with mem0_provider("platform", fake) as mem0:
        assert await mem0.count([MEM_A]) == {MEM_A: 450}
        first = await mem0.list(MEM_A, limit=400)
        assert first.next is not None
        rest = await mem0.list(MEM_A, limit=400, cursor=first.next)
    assert len({r.id for r in first.items + rest.items}) == 450 and rest.next is None
    pages = [r.url.params["page"] for r in fake.requests if r.url.path == "/v3/memories/"]
    assert pages[:3] == ["1", "2", "3"]


async def test_a_cursor_it_did_not_issue_is_refused(mem0: Mem0Provider) -> None:
    with pytest.raises(ProviderRejected):
        await mem0.list(MEM_A, cursor="not-a-cursor")


async def test_as_of_is_refused_on_reads_and_degraded_on_recall(mem0: Mem0Provider) -> None:
    """mem0 cannot read a memory as it stood; the capability says so and nothing pretends otherwise."""
    record = await mem0.remember(MEM_A, note("Acme"))
    with pytest.raises(Unsupported):
        await mem0.get(MEM_A, record.id, as_of=T0)
    with pytest.raises(Unsupported):
        await mem0.list(MEM_A, as_of=T0)
    answer = await mem0.recall([MEM_A], RecallQuery(query="Acme", as_of=T0))
    assert "as_of:not_supported" in answer.degraded


# --------------------------------------------------------------------------- recall signals


async def test_text_alone_is_degraded_and_mem0_is_not_asked(fake: FakeMem0, mem0: Mem0Provider) -> None:
    await mem0.remember(MEM_A, note("Acme renews"))
    fake.requests.clear()
    answer = await mem0.recall([MEM_A], RecallQuery(text="Acme"))
    assert (answer.hits, answer.degraded) == ((), ("text:not_supported",))
    assert fake.requests == []


async def test_filters_are_judged_on_the_records(mem0: Mem0Provider) -> None:
    """Filters alone read the memory and keep what matches, newest first; with a query the two lists are
    fused: what matches both first, then what matches one, each hit saying which."""
    acme = await mem0.remember(MEM_A, note("Acme renews", attributes={"account": "acme", "n": 3}))
    quillon = await mem0.remember(MEM_A, note("Quillon renews", minutes=1, attributes={"account": "quillon", "n": 9}))
    older = await mem0.remember(MEM_A, note("Acme pays", minutes=2, type="fact", attributes={"account": "acme"}))
    by_account = Condition("attributes.account", "eq", "acme")
    answer = await mem0.recall([MEM_A], RecallQuery(filters=(by_account,)))
    assert [h.record.id for h in answer.hits] == [older.id, acme.id]
    assert all(h.why == ("filters",) for h in answer.hits)
    fused = await mem0.recall(
        [MEM_A], RecallQuery(query="renews", filters=(by_account, Condition("attributes.n", "lt", 5)))
    )
    assert fused.hits[0].record.id == acme.id and fused.hits[0].why == ("query", "filters")
    assert (quillon.id, ("query",)) in [(h.record.id, h.why) for h in fused.hits[1:]]
    typed = await mem0.recall([MEM_A], RecallQuery(filters=(Condition("type", "in", ["fact"]),)))
    assert [h.record.id for h in typed.hits] == [older.id]
    after = await mem0.recall([MEM_A], RecallQuery(filters=(Condition("time.written_at", "gt", T0.isoformat()),)))
    assert acme.id not in {h.record.id for h in after.hits} and len(after.hits) == 2


async def test_a_filter_on_an_unknown_field_is_refused_before_mem0_is_asked(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    with pytest.raises(ProviderRejected):
        await mem0.recall([MEM_A], RecallQuery(query="x", filters=(Condition("score", "eq", 1),)))
    assert fake.requests == []


# --------------------------------------------------------------------------- erase


async def test_erase_reports_every_id_unreachable_because_mem0_keeps_history(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    a = await mem0.remember(MEM_A, note("Acme renews in March"))
    b = await mem0.remember(MEM_A, note("Acme renews in April"))
    erasure = await mem0.erase(MEM_A, [a.id, b.id, a.id, "hrec_00000000-0000-4000-8000-000000000000"])
    assert erasure.erased == (a.id, b.id) and erasure.unreachable == (a.id, b.id)
    assert fake.memories == {}
    assert fake.histories[a.id.removeprefix("hrec_")][-1]["event"] == "DELETE"
    with pytest.raises(RecordNotFound):
        await mem0.get(MEM_A, a.id)


async def test_erase_reports_nothing_unreachable_when_mem0_serves_no_history(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """Unreachable is measured, not assumed: a mem0 that drops history on delete gets a clean erase."""
    fake.keep_history_after_delete = False
    record = await mem0.remember(MEM_A, note("Acme"))
    erasure = await mem0.erase(MEM_A, [record.id])
    assert (erasure.erased, erasure.unreachable) == ((record.id,), ())


async def test_erase_counts_a_history_it_could_not_check_as_unreachable(fake: FakeMem0, mem0: Mem0Provider) -> None:
    fake.keep_history_after_delete = False
    record = await mem0.remember(MEM_A, note("Acme"))
    fake.fail("500", when=lambda r: "history" in r.url.path)
    erasure = await mem0.erase(MEM_A, [record.id])
    assert (erasure.erased, erasure.unreachable) == ((record.id,), (record.id,))


# --------------------------------------------------------------------------- errors


async def test_a_timeout_is_provider_timeout(fake: FakeMem0, mem0: Mem0Provider) -> None:
    fake.fail("timeout")
    with pytest.raises(ProviderTimeout) as caught:
        await mem0.list(MEM_A)
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)


async def test_a_refused_connection_is_unavailable(fake: FakeMem0, mem0: Mem0Provider) -> None:
    fake.fail("connect")
    with pytest.raises(ProviderUnavailable) as caught:
        await mem0.remember(MEM_A, note("x"))
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_a_server_error_is_unavailable(fake: FakeMem0, mem0: Mem0Provider) -> None:
    fake.fail("500")
    with pytest.raises(ProviderUnavailable, match="500"):
        await mem0.recall([MEM_A], RecallQuery(query="x"))


async def test_an_answer_that_is_not_json_is_unavailable(fake: FakeMem0, mem0: Mem0Provider) -> None:
    record = await mem0.remember(MEM_A, note("x"))
    fake.fail("garbage")
    with pytest.raises(ProviderUnavailable) as caught:
        await mem0.get(MEM_A, record.id)
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("0.5", 0.5), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), (None, None), ("soon", None)],
)
async def test_429_is_rate_limited_with_retry_after(
    fake: FakeMem0, mem0: Mem0Provider, header: str | None, expected: float | None
) -> None:
    fake.fail("429", retry_after=header)
    with pytest.raises(ProviderRateLimited) as caught:
        await mem0.count([MEM_A])
    assert caught.value.retry_after == expected


async def test_a_wrong_key_is_unauthorized_not_the_callers_mistake(variant: Variant) -> None:
    """A 401 is memfed's credential being refused: unavailable (unauthorized), never a rejected request."""
    fake = FakeMem0(variant, KEY)
    async with fake.client() as client:
        mem0 = Mem0Provider(client, base_url=fake.base_url, api_key="wrong-key-123", variant=variant)
        with pytest.raises(ProviderUnauthorized, match="401") as caught:
            await mem0.list(MEM_A)
    assert caught.value.reason == "unauthorized" and not isinstance(caught.value, ProviderRejected)


async def test_a_stated_write_the_platform_queues_is_unavailable_not_guessed() -> None:
    def queued(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"event_id": "e1", "status": "PENDING"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(queued)) as client:
        mem0 = Mem0Provider(client, base_url=PLATFORM_URL, api_key=KEY, variant="platform")
        with pytest.raises(ProviderUnavailable, match="queued"):
            await mem0.remember(MEM_A, note("x"))


# --------------------------------------------------------------------------- the key stays secret


def _everything_said(values: list[Any], errors: list[BaseException]) -> str:
    said = [repr(v) for v in values]
    for error in errors:
        chain: BaseException | None = error
        while chain is not None:
            said += [str(chain), repr(chain), repr(chain.args)]
            chain = chain.__cause__ or chain.__context__
    return "\n".join(said)


async def test_the_vendor_key_never_appears_in_answers_errors_or_logs(
    variant: Variant, caplog: pytest.LogCaptureFixture
) -> None:
    """Not in any returned value, exception (with its causes), log line of memfed or httpx, or repr."""
    for name in ("memfed", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    fake = FakeMem0(variant, KEY)
    values: list[Any] = []
    errors: list[BaseException] = []
    async with mem0_provider(variant, fake) as mem0:
        values += [mem0, mem0.capabilities(), mem0.capabilities().document("mem0"), vars(mem0)]
        values += await exercise(mem0)
        record = await mem0.remember(MEM_B, note("still here"))
        for mode in ("timeout", "connect", "500", "garbage", "429"):
            fake.fail(mode, retry_after="3")
            try:
                await mem0.get(MEM_B, record.id)
            except ProviderError as exc:
                errors.append(exc)
    # A vendor that echoes the key back in an error body.
    echo = httpx.MockTransport(lambda r: httpx.Response(400, text=f"bad key {KEY} for {r.url.path}"))
    async with httpx.AsyncClient(transport=echo) as client:
        mem0 = Mem0Provider(client, base_url=fake.base_url, api_key=KEY, variant=variant)
        try:
            await mem0.list(MEM_A)
        except ProviderRejected as exc:
            errors.append(exc)
    assert len(errors) == 6
    assert any(r.name == "memfed.adapters.mem0" for r in caplog.records)
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.args!r}" for r in caplog.records) + caplog.text
    assert KEY not in logged
    assert KEY not in _everything_said(values, errors)


# --------------------------------------------------------------------------- configuration


async def test_from_config_builds_each_variant(tmp_path: Path) -> None:
    async with httpx.AsyncClient() as client:
        platform = await Mem0Provider.from_config(
            {"variant": "platform"}, client=client, data_dir=tmp_path, api_key=KEY
        )
        oss = await Mem0Provider.from_config(
            {"variant": "oss", "base_url": OSS_URL, "entity_prefix": "team1-", "timeout": 5},
            client=client,
            data_dir=tmp_path,
            api_key=None,
        )
    assert "api.mem0.ai" in repr(platform) and platform.capabilities().searches_many_memories
    assert oss.variant == "oss" and not oss.capabilities().searches_many_memories
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"variant": "oss"}, KEY),  # no base_url
        ({"variant": "hosted"}, KEY),
        ({"variant": "platform"}, None),  # the Platform always needs a key
        ({"variant": "platform", "api_key": KEY}, KEY),  # unknown option: a typo is not ignored
        ({"variant": "platform", "entity_prefix": "*"}, KEY),
    ],
)
async def test_from_config_refuses_what_cannot_work(tmp_path: Path, options: dict[str, Any], key: str | None) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError):
            await Mem0Provider.from_config(options, client=client, data_dir=tmp_path, api_key=key)


async def test_a_record_json_cannot_carry_is_refused_before_mem0_is_asked(
    fake: FakeMem0, mem0: Mem0Provider
) -> None:
    """A NaN or an object in attributes would leave as invalid JSON or not at all: refused here."""
    for attributes in ({"ratio": float("nan")}, {"when": T0}):
        with pytest.raises(ProviderRejected):
            await mem0.remember(MEM_A, note("x", attributes=attributes))
    with pytest.raises(ProviderRejected):
        await mem0.remember(MEM_A, NewRecord("note", (Part(type="file"),), AGENT, T0))
    assert fake.requests == []


async def test_a_redirect_is_not_followed_with_the_key(variant: Variant) -> None:
    """A 3xx is a failure, not a hop: the key header would go wherever the redirect points."""
    seen: list[httpx.Request] = []

    def redirect(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(307, headers={"location": "https://elsewhere.example/steal"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(redirect), follow_redirects=True) as client:
        mem0 = Mem0Provider(client, base_url=PLATFORM_URL, api_key=KEY, variant=variant)
        with pytest.raises(ProviderUnavailable, match="307"):
            await mem0.list(MEM_A)
    assert [r.url.host for r in seen] == ["api.mem0.ai"]
